// step_hygiene: every update equals an independent computation of it. The check records the
// fresh gradient of each step's backward with hooks on the parameters, then replays the step from
// a checkpoint taken just before it: that gradient, clipped to the recipe's bound with LibTorch's
// clip_grad_norm_, one step of the recipe's own optimizer. The recipe's update must equal it within
// a floating-point bound: gradients fresh (not accumulated), clipping between backward and step, a
// step that saw them.
//
// The bound. A correct recipe may clip another way (the global norm in float64, per-parameter norms
// combined in another order, a hand-written coefficient): the two updates then differ only through
// the clipped gradient g_c = g * min(1, c / (||g|| + eps)). The norm of n elements in m tensors, as a
// sum of squares in any order and grouping, has relative error at most (n/2 + m + 1) u to first
// order (Higham, Accuracy and Stability, ch. 4: a sum of n non-negative terms, |error| <= (n-1) u
// times the sum; the squares add u each, a sqrt halves it and adds u, combining per-tensor norms adds
// up to 2u a tensor), the coefficient's division and the eps add 2u, so two correct coefficients
// differ by at most kappa u relative, kappa = n + 2m + 8 (with the product g * coefficient rounded
// on each side, 2u more: (kappa + 2) u |g_c|). The recipe's optimizer (SGD: d = g_c + wd p,
// v' = mu v + d, p' = p - lr v') is then the same code on inputs that differ by that much: the update
// moves by lr |delta g_c|, and each of its three roundings may land one ulp (<= 2u |x|) apart:
// 2u |p'| for p', 2u lr |v'| = 2u |p' - p| for v', and 2u lr |d| <= 2u lr |g_c| (the wd |p| part is
// 1e-3 of the |p'| term for any weight decay <= 1e-2 and is absorbed in it). Per element:
//
//     |p'_recipe - p'_replay| <= u * (2 |p'| + 2 |p' - p| + lr * (kappa + 2) * |g_c|)
//
// with kappa = 0 when the recipe does not clip (its gradient then reaches the optimizer unchanged).
// u is the parameters' unit roundoff (fp32: 2^-24).
//
// Any other optimizer (Adam, AdamW, RMSprop, Adagrad, one of the recipe's own): torch::optim's
// optimizers act element by element, so the update's first-order response to the clipped gradient
// differing by a relative (kappa + 2) u (common factor and per-element rounding alike) is measured,
// not derived: the same replay again with g_c * (1 + (kappa + 2) u), S = |p'(g_c (1 + s)) - p'(g_c)|
// (the two replays' own roundings of p' may hide up to 2u |p'| of it, added). Their internal
// roundings, each landing up to one ulp apart on inputs that differ, are counted per optimizer on
// the update d = p' - p: Adam / AdamW m' and v' (2u each, v' through the sqrt u), sqrt, / bias
// correction, + eps, the division m / denom and the product with the step size (2u each): 13u, 14
// taken; RMSprop the same chain: 14; Adagrad sum, sqrt, + eps, division, product: 12; an optimizer
// this file does not know: 16 assumed (said in the evidence). Per element:
//
//     |p'_recipe - p'_replay| <= u * (4 |p'| + c_opt |p' - p|) + S The evidence gives the largest deviation as a
// fraction of this bound (the margin); a broken step is reported with how many times the bound it is.
//
// A differing update is explained only by what reproduces it: the step replayed with no gradient,
// with this step's gradient unclipped, with only the last of its backward passes (micro-batches whose
// earlier gradients were cleared before the step: zero_grad inside an accumulation loop), with this
// step's plus the gradient the previous step left, or with that left gradient alone (a stale one),
// each compared within the same bound. When none does, the evidence says what differs, by how much,
// and that the cause is not determined.
//
// Precondition: the replay starts from the recipe's own checkpoint. Right after loading it, the
// replay's parameters, optimizer state and learning rates must be bitwise those the recipe had when
// it saved (a round trip of the same data: bitwise by nature). When they are not, the cell is
// skipped with the precondition named: resume_equality judges the checkpoint; a step-order failure
// here would blame the wrong practice.
#include <algorithm>
#include <functional>
#include <memory>
#include <optional>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "harness/contract/scratch.h"
#include "harness/util/text_format.h"
#include "suites/support/fingerprint.h"
#include "suites/support/generators.h"
#include "suites/support/hooks.h"
#include "suites/support/kit.h"
#include "suites/support/optimizer_view.h"
#include "suites/support/tensor_compare.h"
#include "suites/support/tolerance.h"

namespace tc {
namespace {

constexpr const char* kFresh = "fresh_gradients";
constexpr const char* kClip = "clip_between_backward_and_step";
constexpr const char* kBatch = "batch_gradient";

// The gradients on `params` (CPU copies; undefined where a parameter has none).
std::vector<at::Tensor> grads_of(const NamedTensors& params) {
  std::vector<at::Tensor> out;
  for (const auto& [n, p] : params) out.push_back(p.grad().defined() ? p.grad().detach().cpu().clone() : at::Tensor());
  return out;
}

// One step computed independently: a fresh run of the recipe loaded from `before`, its gradients set
// to `grads` (undefined: none), clipped to max_norm with clip_grad_norm_ (0: not clipped), one step
// of its optimizer.
struct Replayed {
  NamedTensors loaded_params, loaded_state;  // right after load_checkpoint
  std::vector<double> loaded_lrs;
  std::vector<at::Tensor> clipped;  // what the optimizer saw, per parameter (CPU; undefined: none)
  NamedTensors after;               // the parameters after the step
  double lr = 0.0;                  // the largest learning rate of the param groups
  // Not SGD: the measured first-order response S per parameter (see the top of the file) and the
  // optimizer's counted roundings on the update, c_opt.
  NamedTensors sensitivity;
  double update_roundings = 2.0;
};

// c_opt for the update rules of torch.optim by name (0: SGD, whose bound is derived in full above).
double update_roundings(OptimizerProbe& o, std::string* name = nullptr) {
  const std::string a = o.optimizer_algorithm();
  auto named = [&](const std::string& n, double c) {
    if (name) *name = n;
    return c;
  };
  if (a == "SGD") return named(a, 0.0);
  if (a == "AdamW" || a == "Adam" || a == "RMSprop") return named(a, 14.0);
  if (a == "Adagrad") return named(a, 12.0);
  return named(a + ", an optimizer torchconform does not know (16 roundings assumed on its update)", 16.0);
}

// The relative difference two correct clipped gradients may have: (kappa + 2) u, kappa as above.
double gradient_slack(const std::vector<at::Tensor>& grads, double max_norm) {
  int64_t n = 0, m = 0;
  double u = 0.0;
  for (const auto& g : grads) {
    if (!g.defined()) continue;
    n += g.numel();
    ++m;
    u = std::max(u, unit_roundoff_of(g.scalar_type()));
  }
  const double kappa = max_norm > 0 ? static_cast<double>(n + 2 * m + 8) : 0.0;
  return (kappa + 2) * u;
}

void set_grads(NamedTensors& ps, const std::vector<at::Tensor>& grads, double factor, std::vector<at::Tensor>* with) {
  for (size_t i = 0; i < ps.size(); ++i) {
    if (i >= grads.size() || !grads[i].defined()) continue;
    at::Tensor g = grads[i].to(ps[i].second.device());
    ps[i].second.mutable_grad() = factor == 1.0 ? g.clone() : (g.to(torch::kDouble) * factor).to(g.scalar_type());
    if (with) with->push_back(ps[i].second);
  }
}

Replayed replay(const CheckContext& ctx, const RunOptions& opts, const std::string& before,
                const std::vector<at::Tensor>& grads, double max_norm) {
  std::unique_ptr<Run> r = fresh_run(ctx, opts);
  r->load_checkpoint(before);
  Replayed out;
  out.loaded_params = snapshot(r->parameters());
  out.loaded_state = snapshot(r->optimizer_state());
  const std::shared_ptr<OptimizerProbe> opt = optimizer_of(*r);
  out.loaded_lrs = learning_rates(*opt);
  for (double lr : out.loaded_lrs) out.lr = std::max(out.lr, lr);
  NamedTensors ps = r->parameters();
  std::vector<at::Tensor> with_grad;
  set_grads(ps, grads, 1.0, &with_grad);
  if (max_norm > 0 && !with_grad.empty()) torch::nn::utils::clip_grad_norm_(with_grad, max_norm);
  out.clipped = grads_of(ps);
  opt->optimizer_step();
  out.after = snapshot(r->parameters());
  out.update_roundings = update_roundings(*opt);
  if (out.update_roundings > 0) {
    // The same step from the same state with the clipped gradient scaled by (1 + s).
    r->load_checkpoint(before);
    NamedTensors again = r->parameters();
    set_grads(again, out.clipped, 1.0 + gradient_slack(grads, max_norm), nullptr);
    opt->optimizer_step();
    const NamedTensors moved = snapshot(r->parameters());
    for (size_t i = 0; i < moved.size(); ++i) {
      out.sensitivity.emplace_back(
          moved[i].first, (moved[i].second.to(torch::kDouble) - out.after[i].second.to(torch::kDouble)).abs());
    }
  }
  return out;
}

// Per element: u * (2 |p'| + 2 |p' - p| + lr * (kappa + 2) * |g_c|) for SGD, else
// u * (4 |p'| + c_opt |p' - p|) + S (see the top of the file).
NamedTensors update_bound(const NamedTensors& start, const Replayed& r, double kappa) {
  NamedTensors b;
  for (size_t i = 0; i < r.after.size(); ++i) {
    const at::Tensor after = r.after[i].second.to(torch::kDouble);
    const double u = unit_roundoff_of(r.after[i].second.scalar_type());
    if (r.update_roundings > 0) {
      at::Tensor t = u * (4 * after.abs() + r.update_roundings * (after - start[i].second.to(torch::kDouble)).abs());
      if (i < r.sensitivity.size()) t = t + r.sensitivity[i].second;
      b.emplace_back(r.after[i].first, t);
      continue;
    }
    at::Tensor t = 2 * after.abs() + 2 * (after - start[i].second.to(torch::kDouble)).abs();
    if (i < r.clipped.size() && r.clipped[i].defined()) t = t + r.lr * (kappa + 2) * r.clipped[i].to(torch::kDouble).abs();
    b.emplace_back(r.after[i].first, u * t);
  }
  return b;
}

Tolerance against(const NamedTensors& recipe_after, const NamedTensors& start, const Replayed& r, double kappa) {
  return compare_within(recipe_after, r.after, update_bound(start, r, kappa));
}

double l2(const std::vector<at::Tensor>& gs) {
  double s = 0.0;
  for (const auto& g : gs) {
    if (g.defined()) s += g.to(torch::kDouble).pow(2).sum().item<double>();
  }
  return std::sqrt(s);
}

std::string times(double ratio) { return fmt::sig(ratio, 3) + "x the bound"; }

// What explains a differing update, tried in turn; each replay compared within the same bound.
struct Cause {
  std::string promise;
  std::string text;
  bool gradient_was_fresh = false;  // the explanation uses this step's gradient alone
  bool proven = true;               // false: no replay reproduced the update
};

// The sum of backward passes first..end of a step (parts[k][i]: pass k's gradient of parameter i).
std::vector<at::Tensor> sum_of_passes(const std::vector<std::vector<at::Tensor>>& parts, size_t first) {
  std::vector<at::Tensor> out(parts.empty() ? 0 : parts[0].size());
  for (size_t k = first; k < parts.size(); ++k) {
    for (size_t i = 0; i < out.size(); ++i) {
      if (parts[k][i].defined()) out[i] = out[i].defined() ? out[i] + parts[k][i] : parts[k][i];
    }
  }
  return out;
}

Cause explain(const CheckContext& ctx, const RunOptions& opts, const std::string& before, const NamedTensors& start,
              const NamedTensors& recipe_after, const std::vector<at::Tensor>& fresh,
              const std::vector<std::vector<at::Tensor>>& passes,
              const std::vector<at::Tensor>& left_before, const std::vector<at::Tensor>& left_after,
              const Replayed& correct, double max_norm, double kappa) {
  const std::vector<at::Tensor> none(fresh.size());
  const Tolerance t_none = against(recipe_after, start, replay(ctx, opts, before, none, max_norm), kappa);
  if (t_none.within()) {
    return {kFresh, "it equals a step with no gradient at all (within " + fmt::sig(t_none.ratio, 3) +
                        " of the bound): the gradient was cleared, or never reached the optimizer, between "
                        "backward and step"};
  }
  const double norm = l2(fresh);
  if (max_norm > 0 && norm > max_norm) {
    const Tolerance t_raw = against(recipe_after, start, replay(ctx, opts, before, fresh, 0.0), 0.0);
    if (t_raw.within()) {
      // Where the gradient left on the parameters is the clipped one, clipping ran after the step.
      NamedTensors left, clipped, bound;
      for (size_t i = 0; i < fresh.size(); ++i) {
        const std::string n = start[i].first;
        left.emplace_back(n, left_after[i]);
        clipped.emplace_back(n, correct.clipped[i]);
        bound.emplace_back(n, correct.clipped[i].defined()
                                  ? (kappa + 2) * unit_roundoff_of(correct.clipped[i].scalar_type()) *
                                        correct.clipped[i].to(torch::kDouble).abs()
                                  : at::Tensor());
      }
      const bool clipped_after = compare_within(left, clipped, bound).within();
      return {kClip,
              "it equals the update from this step's gradient unclipped (within " + fmt::sig(t_raw.ratio, 3) +
                  " of the bound; gradient norm " + fmt::sig(norm, 4) + " > max_norm " +
                  fmt::sig(max_norm, 4) + "): clipping did not happen between backward and step" +
                  (clipped_after ? "; the gradient left on the parameters is the clipped one, so clipping came "
                                   "after the step"
                                 : ""),
              true};
    }
  }
  // Part of the step's gradient: the last backward passes only, the earlier ones cleared before the step.
  for (size_t first = passes.size() > 1 ? passes.size() - 1 : 0; first >= 1 && first < passes.size(); --first) {
    const Tolerance t_part = against(recipe_after, start, replay(ctx, opts, before, sum_of_passes(passes, first), max_norm), kappa);
    if (t_part.within()) {
      const size_t used = passes.size() - first;
      return {kFresh, "it equals the update from the last " + (used == 1 ? std::string("one") : std::to_string(used)) +
                          " of the step's " + std::to_string(passes.size()) + " backward passes alone (within " +
                          fmt::sig(t_part.ratio, 3) + " of the bound): the gradients of the earlier " +
                          std::to_string(first) + " were cleared before the step (zero_grad inside the accumulation loop)"};
    }
  }
  bool had_left = false;
  std::vector<at::Tensor> summed(fresh.size());
  for (size_t i = 0; i < fresh.size(); ++i) {
    const bool l = i < left_before.size() && left_before[i].defined() && left_before[i].abs().max().item<double>() > 0;
    had_left = had_left || l;
    summed[i] = !fresh[i].defined() ? (l ? left_before[i] : at::Tensor()) : l ? left_before[i] + fresh[i] : fresh[i];
  }
  if (had_left) {
    const Tolerance t_sum = against(recipe_after, start, replay(ctx, opts, before, summed, max_norm), kappa);
    if (t_sum.within()) {
      return {kFresh, "it equals the update from the sum of this step's gradient and the gradient the previous "
                      "step left on the parameters (within " + fmt::sig(t_sum.ratio, 3) +
                          " of the bound): gradients accumulate across steps (not cleared before backward)"};
    }
    const Tolerance t_stale = against(recipe_after, start, replay(ctx, opts, before, left_before, max_norm), kappa);
    if (t_stale.within()) {
      return {kFresh, "it equals the update from the gradient the previous step left on the parameters alone (within " +
                          fmt::sig(t_stale.ratio, 3) + " of the bound): the step used a stale gradient, not this "
                          "step's (the optimizer stepped before this step's backward)"};
    }
  }
  return {kFresh, std::string("none of the explanations tried reproduces it (a step with no gradient; ") +
                      (max_norm > 0 && norm > max_norm ? "the gradient unclipped; " : "") +
                      (passes.size() > 1 ? "the last backward passes of " + std::to_string(passes.size()) + "; " : std::string()) +
                      (had_left ? "this step's gradient plus the previous step's, or the previous step's alone"
                                : "no gradient was left from a previous step") +
                      ")",
          false, false};
}

// --- experiments on the recipe's own step ----------------------------------------------------------
// For an update the replay model (backward's gradient -> clip -> the recipe's optimizer) does not
// reproduce: the recipe may change the gradient or the parameters in ways the model does not know
// (weight decay written by hand, a gradient transform). The step itself is run again from the
// snapshot it began in (its checkpoint and the default generators' states), as it is and with one
// thing changed; the same code twice from the same state is bitwise the same, so any difference is
// the change's doing.

// A gaussian tensor like `like` (its shape, dtype, device) with the root mean square `rms`, from a
// private generator (the default generators are not touched).
at::Tensor noise_like(const at::Tensor& like, double rms, at::Generator& gen) {
  at::Tensor n = torch::randn(like.sizes(), gen, torch::TensorOptions().dtype(torch::kFloat));
  return (n * rms).to(like.options());
}

double rms_of(const at::Tensor& g) {
  if (!g.defined() || g.numel() == 0) return 0.0;
  const double r = g.to(torch::kDouble).pow(2).mean().sqrt().item<double>();
  return r > 0 && std::isfinite(r) ? r : 0.0;
}

NamedTensors step_from(const CheckContext& ctx, const RunOptions& opts, const std::string& before,
                       const GeneratorStates& gen, const std::function<void(Run&, HookSet&)>& change) {
  std::unique_ptr<Run> r = fresh_run(ctx, opts);
  r->load_checkpoint(before);
  restore_generators(gen);
  HookSet hooks;
  if (change) change(*r, hooks);
  r->train_step();
  hooks.remove_all();
  return snapshot(r->parameters());
}

struct Experiments {
  std::optional<std::string> stale_used;    // proven: a gradient left before the step moves the update
  std::optional<std::string> grad_ignored;  // proven: the backward's gradient does not move the update
  std::string held;                         // what the experiments showed of a correct step
};

Experiments run_experiments(const CheckContext& ctx, const RunOptions& opts, const std::string& before,
                            const GeneratorStates& gen, const NamedTensors& start,
                            const std::vector<at::Tensor>& fresh) {
  auto scale = [&fresh](size_t i) {
    const double r = i < fresh.size() ? rms_of(fresh[i]) : 0.0;
    return r > 0 ? r : 1e-3;
  };
  Experiments e;
  const NamedTensors as_is = step_from(ctx, opts, before, gen, nullptr);
  // 1. A gradient left on the parameters before the step (as a previous step leaves it): a step
  //    that clears gradients before its backward makes the same update.
  const NamedTensors with_stale = step_from(ctx, opts, before, gen, [&](Run& r, HookSet&) {
    at::Generator g = at::make_generator<at::CPUGeneratorImpl>(0x57a1e);
    const NamedTensors ps = r.parameters();
    for (size_t i = 0; i < ps.size(); ++i) {
      if (ps[i].second.requires_grad()) ps[i].second.mutable_grad() = noise_like(ps[i].second, scale(i), g);
    }
  });
  if (auto d = first_tensor_difference(as_is, with_stale)) {
    const NamedTensors again = step_from(ctx, opts, before, gen, nullptr);
    if (auto d2 = first_tensor_difference(as_is, again)) {
      throw SkipCell("precondition not met: the step run twice from the same checkpoint and generator states "
                     "gives two updates ('" + d2->name + "' max |diff| " + fmt::sig(d2->max_abs_diff, 3) +
                     "), so an experiment on it proves nothing; step_hygiene not judged");
    }
    e.stale_used = "the step run again from the same snapshot with a gradient left on the parameters beforehand "
                   "(gaussian, the size of this step's) makes another update ('" + d->name + "' max |diff| " +
                   fmt::sig(d->max_abs_diff, 3) + "; the same step without it is bitwise reproducible): "
                   "gradients are not cleared before backward, so they accumulate across steps";
    return e;
  }
  // 2. The backward's gradient changed on its way (a hook adds noise the size of the gradient): a
  //    step whose optimizer uses that gradient makes another update.
  if (!first_tensor_difference(start, as_is)) {
    e.held = "a gradient left before the step does not change its update (bitwise); whether the backward's "
             "gradient reaches the optimizer not judged: the step did not change any parameter";
    return e;
  }
  const NamedTensors perturbed = step_from(ctx, opts, before, gen, [&](Run& r, HookSet& hooks) {
    auto g = std::make_shared<at::Generator>(at::make_generator<at::CPUGeneratorImpl>(0x9e7));
    const NamedTensors ps = r.parameters();
    for (size_t i = 0; i < ps.size(); ++i) {
      const double rms = scale(i);
      hooks.add_replacing(ps[i].second, [g, rms](const at::Tensor& grad) { return grad + noise_like(grad, rms, *g); });
    }
  });
  if (!first_tensor_difference(as_is, perturbed)) {
    e.grad_ignored = "the step run again from the same snapshot with noise the size of the gradient added to the "
                     "backward's gradient makes bitwise the same update: the gradient backward computes never "
                     "reaches the optimizer (cleared between backward and step)";
    return e;
  }
  e.held = "a gradient left before the step does not change its update (bitwise), and the backward's gradient "
           "does (noise added to it moves the update)";
  return e;
}

// One step of the recipe, watched: the checkpoint it began from (`before`), its state then, the
// gradient its backward produced (hooks; frozen parameters take none), the gradients left on the
// parameters before and after, and the parameters after.
struct Observed {
  NamedTensors start, state, after;
  std::vector<double> lrs;
  std::vector<at::Tensor> fresh, left_before, left_after;
  std::vector<std::vector<at::Tensor>> passes;  // passes[k][i]: backward pass k's gradient of parameter i
  GeneratorStates gen;
  double loss = 0.0;
};

Observed observe_step(Run& run, const std::string& before, c10::DeviceType device) {
  Observed o;
  run.save_checkpoint(before);
  const NamedTensors params = run.parameters();
  o.start = snapshot(params);
  o.state = snapshot(run.optimizer_state());
  o.lrs = learning_rates(*optimizer_of(run));
  o.left_before = grads_of(params);
  o.gen = save_generators(device);
  o.fresh.resize(params.size());
  std::vector<size_t> calls(params.size(), 0);
  HookSet hooks;
  for (size_t i = 0; i < params.size(); ++i) {
    hooks.add(params[i].second, [&o, &calls, i](const at::Tensor& g) {
      at::Tensor c = g.detach().cpu().clone();
      o.fresh[i] = o.fresh[i].defined() ? o.fresh[i] + c : c;  // several backwards in one step add up
      const size_t k = calls[i]++;  // this parameter's k-th gradient of the step: backward pass k
      if (o.passes.size() <= k) o.passes.resize(k + 1, std::vector<at::Tensor>(o.fresh.size()));
      o.passes[k][i] = c;
    });
  }
  o.loss = run.train_step().loss;
  hooks.remove_all();
  o.after = snapshot(run.parameters());
  o.left_after = grads_of(run.parameters());
  return o;
}

// --- which gradient did the step use: its scale against the batch's loss ----------------------------
// The replay model takes the hooks' gradient as given: a step whose backward passes carry twice the
// batch's gradient (the loss backpropagated twice, micro-batch losses not divided) replays exactly.
// So the sum of the step's backward passes is compared with an independent computation of the
// gradient of the batch's loss: a fresh run loaded from the step's checkpoint, the generators as the
// step began, the step's batch (Run::last_batch) split into as many contiguous micro-batches as the
// step had backward passes (one: the whole batch), each micro-batch's loss (Run::forward_train,
// Run::training_loss) weighed by its share, their gradients summed. The splits a recipe makes are
// tried in turn (candidate_splits); the first whose micro-batch gradients each point their backward
// pass's way to 1e-6 split where the recipe did and drew the step's own dropout masks.
//
// Even then the recipe may weigh its micro-batches otherwise (the mistake looked for), and where no
// split reproduces the masks the recomputation draws others (BatchNorm's statistics are per
// micro-batch, too), so the two are compared by the step's scale along the recomputed gradient, rho = <g_step, g_ref> / |g_ref|^2, not element by element. The mistakes this
// looks for scale the gradient by a whole factor (2 when backpropagated twice, k for k undivided
// micro-batches, 1/k when divided twice), so rho is judged by the nearer of 1 and such a factor on
// a log scale: the boundary is sqrt(2) (and 1/sqrt(2)). The judgement stands only when the
// recomputation's own spread is well inside it: the same recomputation from other generator states
// (other masks) must give |ln rho_noise| < ln(sqrt 2) / 2, and the step's gradient must point the
// recomputed way (cosine > 0.5); otherwise the promise is recorded as not judged, naming which.
struct BatchScale {
  double rho = 1.0, rho_noise = 1.0, cosine = 1.0;
  int64_t passes = 0;
  bool same_draws = false;  // the recomputation points the step's way to 1e-6: it drew the same masks
  std::vector<int64_t> split;  // the micro-batch sizes of the recomputation judged
  std::string not_judged;   // why the scale is not judged (empty: judged)
};

// The gradients of the batch's loss over micro-batches of `sizes` (in order, each loss weighed by
// its share of the batch), one per micro-batch, for the parameters `index` of `r`.
std::vector<std::vector<at::Tensor>> micro_batch_gradients(Run& r, const at::Tensor& x, const at::Tensor& y,
                                                           const std::vector<int64_t>& sizes,
                                                           const std::vector<size_t>& index) {
  const NamedTensors params = r.parameters();
  std::vector<at::Tensor> inputs;
  for (size_t i : index) inputs.push_back(params[i].second);
  std::vector<std::vector<at::Tensor>> parts;
  const int64_t batch = x.size(0);
  int64_t start = 0;
  for (const int64_t n : sizes) {
    const at::Tensor out = r.forward_train(n == batch ? x : x.narrow(0, start, n));
    at::Tensor loss = r.training_loss(out, n == batch ? y : y.narrow(0, start, n));
    if (n != batch) loss = loss * (static_cast<double>(n) / static_cast<double>(batch));
    const std::vector<at::Tensor> g = torch::autograd::grad({loss}, inputs, {}, false, false, /*allow_unused=*/true);
    std::vector<at::Tensor> part;
    for (const at::Tensor& t : g) part.push_back(t.defined() ? t.detach().cpu().to(torch::kDouble) : at::Tensor());
    parts.push_back(std::move(part));
    start += n;
  }
  return parts;
}

std::vector<at::Tensor> summed(const std::vector<std::vector<at::Tensor>>& parts) {
  std::vector<at::Tensor> sum(parts.empty() ? 0 : parts[0].size());
  for (const auto& part : parts) {
    for (size_t j = 0; j < part.size(); ++j) {
      if (part[j].defined()) sum[j] = sum[j].defined() ? sum[j] + part[j] : part[j];
    }
  }
  return sum;
}

// The splits a step of `k` backward passes may have made of a batch, the common ones first: k
// near-equal parts with the first ones larger (torch.tensor_split), parts of a fixed size m with a
// smaller last (torch.split(m), torch.chunk: every m that gives k parts), the whole batch (the same
// loss backpropagated k times); then, where there are at most kMaxCompositions of them, every other
// way to cut the batch into k contiguous parts (a split of the recipe's own, e.g. 4 + 8 + 4).
constexpr int64_t kMaxCompositions = 256;

std::vector<std::vector<int64_t>> candidate_splits(int64_t batch, int64_t k) {
  std::vector<std::vector<int64_t>> out;
  auto add = [&out](const std::vector<int64_t>& sizes) {
    if (std::find(out.begin(), out.end(), sizes) == out.end()) out.push_back(sizes);
  };
  if (k > 1) {
    std::vector<int64_t> even;
    for (int64_t i = 0; i < k; ++i) even.push_back(batch / k + (i < batch % k ? 1 : 0));
    add(even);
    for (int64_t m = (batch + k - 1) / k; m < batch; ++m) {
      std::vector<int64_t> fixed;
      for (int64_t left = batch; left > 0; left -= m) fixed.push_back(std::min(m, left));
      if (static_cast<int64_t>(fixed.size()) == k) add(fixed);
      if (static_cast<int64_t>(fixed.size()) < k) break;
    }
  }
  add({batch});
  // C(batch - 1, k - 1) compositions, counted without overflow.
  double compositions = 1.0;
  for (int64_t i = 1; i < k && compositions <= kMaxCompositions; ++i) {
    compositions = compositions * static_cast<double>(batch - i) / static_cast<double>(i);
  }
  if (k > 1 && compositions <= kMaxCompositions) {
    std::vector<int64_t> sizes(k, 1);
    sizes[k - 1] = batch - (k - 1);
    // Every composition in turn: the odometer over the first k - 1 sizes, the last takes the rest.
    std::function<void(int64_t, int64_t)> fill = [&](int64_t at, int64_t left) {
      if (at == k - 1) {
        sizes[at] = left;
        add(sizes);
        return;
      }
      for (int64_t n = 1; n <= left - (k - 1 - at); ++n) {
        sizes[at] = n;
        fill(at + 1, left - n);
      }
    };
    fill(0, batch);
  }
  return out;
}

double dot(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double s = 0.0;
  for (size_t j = 0; j < a.size() && j < b.size(); ++j) {
    if (a[j].defined() && b[j].defined()) s += (a[j] * b[j]).sum().item<double>();
  }
  return s;
}

BatchScale measure_batch_scale(const CheckContext& ctx, const RunOptions& opts, const std::string& before,
                               const Observed& o, Run& run) {
  BatchScale b;
  b.passes = static_cast<int64_t>(o.passes.size());
  std::vector<size_t> index;
  std::vector<at::Tensor> step;
  for (size_t i = 0; i < o.fresh.size(); ++i) {
    if (!o.fresh[i].defined()) continue;
    index.push_back(i);
    step.push_back(o.fresh[i].to(torch::kDouble));
  }
  if (index.empty() || b.passes == 0) {
    b.not_judged = "the step ran no backward pass the hooks saw";
    return b;
  }
  const auto [x, y] = run.last_batch();
  if (x.size(0) < b.passes) {
    b.not_judged = std::to_string(b.passes) + " backward passes for a batch of " + std::to_string(x.size(0));
    return b;
  }
  std::unique_ptr<Run> r = fresh_run(ctx, opts);
  r->load_checkpoint(before);
  const NamedTensors buffers = r->buffers(), buffers_at = snapshot(buffers);
  // The step's passes, on the parameters judged: pass k's gradient of each (double).
  std::vector<std::vector<at::Tensor>> passes;
  for (const auto& pass : o.passes) {
    std::vector<at::Tensor> p;
    for (size_t i : index) p.push_back(i < pass.size() && pass[i].defined() ? pass[i].to(torch::kDouble) : at::Tensor());
    passes.push_back(std::move(p));
  }
  // Each split the step may have made, from the step's generator states and buffers: the first whose
  // passes each point their micro-batch's way to the precision of the computation drew the step's own
  // masks (then no spread of draws enters the scale); else the first split, judged against its spread.
  std::vector<at::Tensor> ref, other;
  for (const std::vector<int64_t>& sizes : candidate_splits(x.size(0), b.passes)) {
    {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < buffers.size(); ++i) buffers[i].second.copy_(buffers_at[i].second);
    }
    restore_generators(o.gen);
    const std::vector<std::vector<at::Tensor>> parts = micro_batch_gradients(*r, x, y, sizes, index);
    // The same draws: each backward pass points the way of its micro-batch's recomputed gradient (of
    // the whole batch's, when the split is the whole batch), whatever weight the recipe gave it.
    bool same = true;
    for (size_t k = 0; same && k < passes.size(); ++k) {
      const std::vector<at::Tensor>& part = parts[parts.size() == 1 ? 0 : k];
      const double pp = dot(part, part), qq = dot(passes[k], passes[k]);
      same = pp > 0 && qq > 0 && dot(passes[k], part) / std::sqrt(pp * qq) > 1.0 - 1e-6;
    }
    if (ref.empty() || same) {
      ref = summed(parts);
      b.split = sizes;
      other = summed(micro_batch_gradients(*r, x, y, sizes, index));  // other draws
    }
    if (same) {
      b.same_draws = true;
      break;
    }
  }
  const double rr = dot(ref, ref);
  if (!(rr > 0) || !std::isfinite(rr)) {
    b.not_judged = "the recomputed gradient of the batch's loss is zero or not finite";
    return b;
  }
  b.rho = dot(step, ref) / rr;
  b.rho_noise = dot(other, ref) / rr;
  b.cosine = dot(step, ref) / std::sqrt(dot(step, step) * rr);
  const double boundary = std::log(std::sqrt(2.0));
  if (!b.same_draws && !(std::abs(std::log(std::max(b.rho_noise, 1e-30))) < boundary / 2)) {
    b.not_judged = "the recomputation from other generator states (other dropout masks) gives a scale of " +
                   fmt::sig(b.rho_noise, 3) + " along the first, outside 2^(+-1/4): the batch's gradient varies too "
                   "much with its random draws to judge the step's scale";
  } else if (!(b.cosine > 0.5)) {
    b.not_judged = "the step's gradient and the recomputed one point different ways (cosine " + fmt::sig(b.cosine, 3) +
                   "), so a scale between them means nothing";
  }
  return b;
}

// The cause of a scale, named only where the passes prove it.
std::string scale_cause(const BatchScale& b, const Observed& o) {
  bool same = b.passes > 1;
  for (size_t k = 1; same && k < o.passes.size(); ++k) {
    for (size_t i = 0; same && i < o.passes[k].size(); ++i) {
      const at::Tensor& a = o.passes[0][i];
      const at::Tensor& c = o.passes[k][i];
      if (a.defined() != c.defined() || (a.defined() && !torch::equal(a, c))) same = false;
    }
  }
  const std::string k = std::to_string(b.passes);
  if (same) {
    return "its " + k + " backward passes carried bitwise the same gradient: the same loss was backpropagated " + k +
           " times";
  }
  if (b.passes > 1 && std::abs(std::log(b.rho / static_cast<double>(b.passes))) < std::log(std::sqrt(2.0))) {
    return "the step had " + k + " backward passes and its gradient is about " + k +
           "x the batch's: each micro-batch's mean loss was backpropagated undivided (weigh each by its share of the "
           "batch, or divide by " + k + ")";
  }
  if (b.passes > 1 && std::abs(std::log(b.rho * static_cast<double>(b.passes))) < std::log(std::sqrt(2.0))) {
    return "the step had " + k + " backward passes and its gradient is about 1/" + k +
           " of the batch's: the micro-batch losses were divided twice";
  }
  return "the cause is not determined (" + k + " backward pass" + (b.passes == 1 ? "" : "es") + ")";
}

std::string split_text(const std::vector<int64_t>& sizes) {
  if (sizes.size() <= 1) return "the whole batch";
  std::string t;
  for (int64_t n : sizes) t += (t.empty() ? "" : " + ") + std::to_string(n);
  return "micro-batches " + t + " weighed by their share";
}

void judge_batch_scale(const BatchScale& b, const Observed& o, Findings& f) {
  f.metrics()["batch_gradient"] = {{"step", 0}, {"backward_passes", b.passes}, {"scale", b.rho},
                                   {"scale_other_draws", b.rho_noise}, {"cosine", b.cosine},
                                   {"same_draws", b.same_draws}, {"split", b.split},
                                   {"judged", b.not_judged.empty()}};
  if (!b.not_judged.empty()) {
    f.recorded(kBatch, "not judged: step 0: " + b.not_judged);
    return;
  }
  const std::string what = "step 0: the gradient of its " + std::to_string(b.passes) + " backward pass" +
                           (b.passes == 1 ? "" : "es") + " is " + fmt::sig(b.rho, 4) +
                           "x the gradient of the batch's loss recomputed over " + split_text(b.split) +
                           " along it (cosine " + fmt::sig(b.cosine, 9) + ", " +
                           (b.same_draws ? std::string("the step's own random draws")
                                         : "other random draws than the step's; from still others: " +
                                               fmt::sig(b.rho_noise, 4) + "x") +
                           "; bounds 2^(+-1/2))";
  const double boundary = std::log(std::sqrt(2.0));
  const double deviation = std::abs(std::log(b.rho));
  if (deviation < boundary) {
    f.held(kBatch, what, deviation, boundary);
  } else {
    f.broken(kBatch, what + ": " + scale_cause(b, o), deviation, boundary);
  }
}

// The precondition: the checkpoint round trip is exact (else the cell is skipped, named).
void require_round_trip(const Observed& o, const Replayed& r, int64_t t) {
  std::string lost;
  if (auto d = first_tensor_difference(o.start, r.loaded_params)) {
    lost = "the parameters ('" + d->name + "' max |diff| " + fmt::sig(d->max_abs_diff, 3) +
           (d->detail.empty() ? "" : ", " + d->detail) + ")";
  } else if (auto d = first_tensor_difference(o.state, r.loaded_state)) {
    lost = "the optimizer state ('" + d->name + "' max |diff| " + fmt::sig(d->max_abs_diff, 3) +
           (d->detail.empty() ? "" : ", " + d->detail) + ")";
  } else if (o.lrs != r.loaded_lrs) {
    lost = "the learning rate (" + fmt::sig(o.lrs.empty() ? 0.0 : o.lrs[0], 9) + " saved, " +
           fmt::sig(r.loaded_lrs.empty() ? 0.0 : r.loaded_lrs[0], 9) + " after loading)";
  }
  if (lost.empty()) return;
  throw SkipCell("precondition not met at step " + std::to_string(t) +
                 ": save_checkpoint -> load_checkpoint into a fresh run does not reproduce " + lost +
                 "; resume_equality covers the checkpoint round trip; step_hygiene replays each step from "
                 "a checkpoint and is not judged" +
                 (t == 1 ? std::string(" (step 0 had matched)")
                         : t > 1 ? " (steps 0 to " + std::to_string(t - 1) + " had matched)" : std::string()));
}

// kappa of the bound for this step's gradient (0 when the recipe does not clip), and its metrics.
double kappa_of(const std::vector<at::Tensor>& fresh, double max_norm, const NamedTensors& start, nlohmann::json& bound) {
  int64_t n = 0, m = 0;
  for (const auto& g : fresh) {
    if (!g.defined()) continue;
    n += g.numel();
    ++m;
  }
  const double kappa = max_norm > 0 ? static_cast<double>(n + 2 * m + 8) : 0.0;
  if (bound.is_null()) {
    bound = {{"formula", "u * (2|p'| + 2|p' - p| + lr * (kappa + 2) * |g_clipped|)"},
             {"unit_roundoff", start.empty() ? 0.0 : unit_roundoff_of(start[0].second.scalar_type())},
             {"kappa", kappa}, {"gradient_elements", n}, {"gradient_tensors", m}};
  }
  return kappa;
}

// What the steps judged so far showed.
struct Tally {
  nlohmann::json norms = nlohmann::json::array(), per_step = nlohmann::json::array(), bound;
  int64_t over_bound = 0;  // steps whose fresh gradient norm exceeded the clip bound
  double worst_ratio = 0.0, worst_diff = 0.0;
  std::string worst_where;
  std::string unexplained;  // set when the replay model did not hold and the experiments found nothing
};

// A step whose update the replay model does not reproduce: the cause proven by a replay (broken,
// measured against the bound), by an experiment on the recipe's own step (broken), or none (the
// replay model does not fit the recipe: Tally::unexplained).
void judge_mismatch(const CheckContext& ctx, const RunOptions& opts, const std::string& before, const Observed& o,
                    const Replayed& correct, const Tolerance& tol, double max_norm, double kappa, int64_t t,
                    Tally& tally, Findings& f) {
  const Cause c = explain(ctx, opts, before, o.start, o.after, o.fresh, o.passes, o.left_before, o.left_after, correct,
                          max_norm, kappa);
  const std::string step = "step " + std::to_string(t) + ": ";
  if (c.proven) {
    f.metrics()["caught"] = {{"step", t}, {"promise", c.promise}, {"margin", tol.ratio},
                             {"max_abs_diff", tol.max_abs_diff}};
    f.broken(c.promise,
             step + "the update differs from the independent computation (fresh gradient -> clip to " +
                 fmt::sig(max_norm) + " -> the recipe's optimizer step) by max |diff| " +
                 fmt::sig(tol.max_abs_diff, 3) + ", " + times(tol.ratio) + " (" + describe(tol) + "); " + c.text +
                 " (later steps not judged: they start from a different place)",
             tol.ratio, 1.0);
    if (c.promise == kClip && c.gradient_was_fresh) {
      f.held(kFresh, (t == 0 ? std::string("step 0: its gradient was its own")
                             : "steps 0 to " + std::to_string(t) + ": each step's gradient was its own") +
                         ", not accumulated");
    }
    return;
  }
  const Experiments e = run_experiments(ctx, opts, before, o.gen, o.start, o.fresh);
  const std::string mismatch = step + "the update is not the replay model's (fresh gradient -> clip to " +
                               fmt::sig(max_norm) + " -> the recipe's optimizer step): max |diff| " +
                               fmt::sig(tol.max_abs_diff, 3) + ", " + times(tol.ratio) + " (" + describe(tol) +
                               "); " + c.text;
  f.metrics()["replay_model"] = {{"step", t}, {"reproduced", false}, {"ratio_to_bound", tol.ratio}};
  if (e.stale_used || e.grad_ignored) {
    f.metrics()["caught"] = {{"step", t}, {"promise", kFresh}, {"by", "experiment"}};
    f.broken(kFresh, step + *(e.stale_used ? e.stale_used : e.grad_ignored) + " (" + mismatch + ")");
  } else {
    tally.unexplained = step + e.held + " (" + mismatch +
                        "; the recipe changes the gradient or the parameters in a way that model does not know, "
                        "e.g. weight decay written by hand)";
  }
}

// The promises when no step was caught.
void conclude(const Tally& tally, int64_t steps, double max_norm, Findings& f) {
  if (!tally.unexplained.empty()) {
    f.held(kFresh, tally.unexplained);
    f.recorded(kClip, "not judged: clipping is judged through the replay model, which does not reproduce this "
                      "recipe's update (" + fmt::sig(max_norm) + " is its bound)");
    return;
  }
  f.held(kFresh,
         std::to_string(steps) + " updates equal fresh gradient -> clip to " + fmt::sig(max_norm) +
             " -> " + tally.bound.value("optimizer", std::string("optimizer")) + " step within the floating-point bound " +
             (tally.bound.contains("c_opt")
                  ? "u(4|p'| + " + fmt::sig(tally.bound.value("c_opt", 0.0)) +
                        "|p' - p|) + S (S the update's measured response to a (kappa + 2)u change of the clipped gradient)"
                  : std::string("u(2|p'| + 2|p' - p| + lr(kappa + 2)|g_c|)")) +
             ", u = " +
             fmt::sig(tally.bound.value("unit_roundoff", 0.0), 3) + ", kappa = " +
             fmt::sig(tally.bound.value("kappa", 0.0), 9) + ": largest deviation " +
             fmt::sig(tally.worst_ratio, 3) + " of the bound (max |diff| " + fmt::sig(tally.worst_diff, 3) +
             ", " + tally.worst_where + "; gradient norms " + tally.norms.dump() + ")",
         tally.worst_ratio, 1.0);
  if (max_norm <= 0) {
    f.recorded(kClip, "not judged: the recipe does not clip (clip_norm " + fmt::sig(max_norm) + ")");
  } else if (tally.over_bound == 0) {
    f.recorded(kClip, "not judged: no step's fresh gradient norm exceeded " + fmt::sig(max_norm) +
                          ", so clipping had nothing to do");
  } else {
    f.held(kClip, "in " + std::to_string(tally.over_bound) + " of " + std::to_string(steps) +
                      " steps the fresh gradient norm exceeded " + fmt::sig(max_norm) +
                      " and the update was made from the clipped gradient");
  }
}

CheckResult check_step_hygiene(const CheckContext& ctx) {
  Scratch scratch;
  const std::string before = scratch.file("before-step.pt");
  const RunOptions opts = run_options(ctx, ctx.seed);
  std::unique_ptr<Run> run = fresh_run(ctx, opts);
  const double max_norm = run->clip_norm();
  const int64_t steps = 4;
  Findings f;
  Tally tally;
  std::vector<double> losses;  // the recipe's own steps, for the fingerprint
  std::function<void(Findings&)> batch_verdict;  // batch_gradient, measured on step 0
  for (int64_t t = 0; t < steps; ++t) {
    const Observed o = observe_step(*run, before, opts.device.type());
    losses.push_back(o.loss);
    if (t == 0) {
      // Judged after the replays (below), so that the evidence leads with fresh_gradients.
      try {
        const BatchScale b = measure_batch_scale(ctx, opts, before, o, *run);
        batch_verdict = [b, o](Findings& into) { judge_batch_scale(b, o, into); };
      } catch (const ProbeNotProvided& e) {
        const std::string why = e.what();
        batch_verdict = [why](Findings& into) { into.recorded(kBatch, "not judged: " + why); };
      }
    }
    const Replayed correct = replay(ctx, opts, before, o.fresh, max_norm);
    require_round_trip(o, correct, t);
    const double kappa = kappa_of(o.fresh, max_norm, o.start, tally.bound);
    if (!tally.bound.contains("optimizer")) {
      std::string name;
      const double c_opt = update_roundings(*optimizer_of(*run), &name);
      tally.bound["optimizer"] = name;
      if (c_opt > 0) {
        tally.bound["formula"] = "u * (4|p'| + c_opt |p' - p|) + S, S = |p'(g_c (1 + (kappa + 2) u)) - p'(g_c)| measured";
        tally.bound["c_opt"] = c_opt;
      }
    }
    const double norm = l2(o.fresh);
    tally.norms.push_back(norm);
    const Tolerance tol = against(o.after, o.start, correct, kappa);
    tally.per_step.push_back({{"step", t}, {"ratio_to_bound", tol.ratio}, {"max_abs_diff", tol.max_abs_diff},
                              {"worst", describe(tol)}});
    if (!tol.within()) {
      judge_mismatch(ctx, opts, before, o, correct, tol, max_norm, kappa, t, tally, f);
      break;
    }
    if (max_norm > 0 && norm > max_norm) ++tally.over_bound;
    if (tol.ratio >= tally.worst_ratio) {
      tally.worst_ratio = tol.ratio;
      tally.worst_diff = tol.max_abs_diff;
      tally.worst_where = "step " + std::to_string(t) + " " + describe(tol);
    }
  }
  nlohmann::json metrics = {{"steps", steps}, {"clip_norm", max_norm}, {"fresh_grad_norms", tally.norms},
                            {"bound", tally.bound}, {"per_step", tally.per_step},
                            {"max_ratio_to_bound", tally.worst_ratio}};
  for (const char* k : {"caught", "replay_model"}) {
    if (f.metrics().contains(k)) metrics[k] = f.metrics()[k];
  }
  // What this environment computed, for `compare`: the recipe's run up to the last step judged.
  metrics["fingerprint"] = training_fingerprint(
      "the recipe's run, " + std::to_string(losses.size()) + " steps (seed " + std::to_string(ctx.seed) + ")", losses,
      run->parameters());
  f.metrics() = metrics;
  if (!metrics.contains("caught")) conclude(tally, steps, max_norm, f);
  if (batch_verdict) batch_verdict(f);
  return f.result();
}

}  // namespace
}  // namespace tc

namespace tc {
TC_CHECK(step_hygiene,
         "each update equals an independent computation: fresh gradients each step, "
              "clipped between backward and step")
    ->Promise("fresh_gradients", "each update equals an independent computation from fresh gradients")
    ->Promise("clip_between_backward_and_step", "gradients are clipped between backward and step")
    ->Promise("batch_gradient",
              "the step's gradient is the gradient of the batch's loss: micro-batches weighed by their share, "
              "none backpropagated twice");
}  // namespace tc
