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
// A differing update is explained only by what reproduces it within the same bound: the step
// replayed with no gradient; this step's gradient unclipped, or clipped over a subset of the
// parameters (those whose update alone is the unclipped one left out); only the last of its backward
// passes (zero_grad inside an accumulation loop); this step's plus the gradient the previous step
// left, or that left gradient alone (stale). When none does, the cause is not determined.
//
// Precondition: the replay starts from the recipe's own checkpoint. Right after loading it, the
// replay's parameters, optimizer state and learning rates must be bitwise those the recipe had when
// it saved (a round trip of the same data: bitwise by nature). When they are not, the cell is
// skipped, named: resume_equality judges the checkpoint; a failure here would blame the wrong practice.
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
#include "suites/step_hygiene/batch_gradient.h"
#include "suites/step_hygiene/experiments.h"
#include "suites/step_hygiene/replay.h"
#include "suites/support/kit.h"
#include "suites/support/optimizer_view.h"
#include "suites/support/tensor_compare.h"
#include "suites/support/tolerance.h"

namespace tc {
namespace {

constexpr const char* kFresh = "fresh_gradients";
constexpr const char* kClip = "clip_between_backward_and_step";
constexpr const char* kOnce = "optimizer_built_once";
using step_hygiene::BatchScale;
using step_hygiene::judge_batch_scale;
using step_hygiene::kBatchGradient;
using step_hygiene::measure_batch_scale;
using step_hygiene::Experiments;
using step_hygiene::run_experiments;
using step_hygiene::against;
using step_hygiene::fresh_optimizer_over;
using step_hygiene::grads_of;
using step_hygiene::l2;
using step_hygiene::replay;
using step_hygiene::Replayed;
using step_hygiene::times;
using step_hygiene::update_bound;
using step_hygiene::update_roundings;

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

// Clipping over a subset (clip_grad_norm_ given one submodule's or param group's parameters): each
// parameter's update compared on its own with the unclipped and the clipped step's; where some match
// the unclipped one alone, the step replayed clipping the others only must reproduce the update.
std::optional<Cause> clipped_a_subset(const CheckContext& ctx, const RunOptions& opts, const std::string& before,
                                      const NamedTensors& start, const NamedTensors& recipe_after,
                                      const std::vector<at::Tensor>& fresh, const Replayed& raw, const Replayed& correct,
                                      double max_norm, double kappa) {
  const NamedTensors raw_bound = update_bound(start, raw, 0.0), clipped_bound = update_bound(start, correct, kappa);
  std::vector<bool> in_clip(fresh.size(), false);
  std::vector<std::string> left_out;
  size_t with_grad = 0;
  for (size_t i = 0; i < fresh.size() && i < recipe_after.size(); ++i) {
    if (!fresh[i].defined()) continue;
    ++with_grad;
    const bool as_raw = compare_within({recipe_after[i]}, {raw.after[i]}, {raw_bound[i]}).within();
    const bool as_clipped = compare_within({recipe_after[i]}, {correct.after[i]}, {clipped_bound[i]}).within();
    in_clip[i] = !(as_raw && !as_clipped);
    if (!in_clip[i]) left_out.push_back(start[i].first);
  }
  if (left_out.empty() || left_out.size() == with_grad) return std::nullopt;
  const Tolerance t = against(recipe_after, start, replay(ctx, opts, before, fresh, max_norm, &in_clip), kappa);
  if (!t.within()) return std::nullopt;
  return Cause{kClip,
               "it equals the update with clip_grad_norm_ given " + std::to_string(with_grad - left_out.size()) + " of the " +
                   std::to_string(with_grad) + " parameter tensors with a gradient (within " + fmt::sig(t.ratio, 3) +
                   " of the bound; gradient norm " + fmt::sig(l2(fresh), 4) + " > max_norm " + fmt::sig(max_norm, 4) +
                   "): " + fmt::first_items(left_out, 4) +
                   " stepped with their gradient unclipped, so clipping covered a subset of the parameters, not all "
                   "that the optimizer steps",
               true};
}

// The gradient unclipped, over all parameters (clipping after the step, or never) or over some
// (clipping a subset); nullopt where the step's gradient norm did not exceed max_norm or no such
// replay reproduces the update.
std::optional<Cause> explain_clipping(const CheckContext& ctx, const RunOptions& opts, const std::string& before,
                                      const NamedTensors& start, const NamedTensors& recipe_after,
                                      const std::vector<at::Tensor>& fresh, const std::vector<at::Tensor>& left_after,
                                      const Replayed& correct, double max_norm, double kappa) {
  const double norm = l2(fresh);
  if (!(max_norm > 0 && norm > max_norm)) return std::nullopt;
  const Replayed raw = replay(ctx, opts, before, fresh, 0.0);
  const Tolerance t_raw = against(recipe_after, start, raw, 0.0);
  if (!t_raw.within()) return clipped_a_subset(ctx, opts, before, start, recipe_after, fresh, raw, correct, max_norm, kappa);
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
  return Cause{kClip,
               "it equals the update from this step's gradient unclipped (within " + fmt::sig(t_raw.ratio, 3) +
                   " of the bound; gradient norm " + fmt::sig(norm, 4) + " > max_norm " + fmt::sig(max_norm, 4) +
                   "): clipping did not happen between backward and step" +
                   (clipped_after ? "; the gradient left on the parameters is the clipped one, so clipping came "
                                    "after the step"
                                  : ""),
               true};
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
  if (std::optional<Cause> c = explain_clipping(ctx, opts, before, start, recipe_after, fresh, left_after, correct,
                                                 max_norm, kappa)) {
    return *c;
  }
  const double norm = l2(fresh);
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
  // A freshly built optimizer (the optimizer and its schedule made again, inside the epoch loop):
  // this step's gradient, clipped, stepped by an optimizer with no state over the same weights.
  const Tolerance t_rebuilt = against(recipe_after, start, replay(ctx, opts, before, fresh, max_norm, nullptr, &start), kappa);
  if (t_rebuilt.within()) {
    return {kOnce, "it equals the update of a freshly built optimizer and schedule over the same weights and gradient "
                   "(within " + fmt::sig(t_rebuilt.ratio, 3) + " of the bound): the state the optimizer had (momentum, "
                   "moments, the schedule's position) was dropped, the optimizer built again (inside the epoch loop)",
            true};
  }
  return {kFresh, std::string("none of the explanations tried reproduces it (a step with no gradient; a freshly built optimizer; ") +
                      (max_norm > 0 && norm > max_norm ? "the gradient unclipped; " : "") +
                      (passes.size() > 1 ? "the last backward passes of " + std::to_string(passes.size()) + "; " : std::string()) +
                      (had_left ? "this step's gradient plus the previous step's, or the previous step's alone"
                                : "no gradient was left from a previous step") +
                      ")",
          false, false};
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
  // The step replaced the parameter tensors (a new model made in it): hooks on the old ones saw no
  // gradient, so the step cannot be observed.
  bool replaced = false;
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
  const NamedTensors now = run.parameters();
  o.replaced = now.size() != params.size();
  for (size_t i = 0; i < now.size() && !o.replaced; ++i) {
    o.replaced = now[i].second.unsafeGetTensorImpl() != params[i].second.unsafeGetTensorImpl();
  }
  o.after = snapshot(now);
  o.left_after = grads_of(run.parameters());
  return o;
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

// The steps of one cell: each judged step observed, replayed and compared (judge_mismatch where
// the update differs), their tally, the losses of every step run.
struct StepJudge {
  const CheckContext& ctx;
  const RunOptions opts;
  const std::string before;
  Run& run;
  const double max_norm;
  Findings& f;
  Tally tally;
  std::vector<double> losses;                    // the recipe's own steps, for the fingerprint
  std::function<void(Findings&)> batch_verdict;  // batch_gradient, measured on step 0
  std::optional<int64_t> caught_at, replaced_at;

  // Judges step t of the recipe's run (the next one it takes); false when it was caught.
  bool judge(int64_t t) {
    const Observed o = observe_step(run, before, opts.device.type());
    losses.push_back(o.loss);
    if (o.replaced) {  // not observable: the hooks were on the tensors the step replaced
      replaced_at = t;
      return true;
    }
    if (t == 0) measure_batch(o);
    const Replayed correct = replay(ctx, opts, before, o.fresh, max_norm);
    require_round_trip(o, correct, t);
    const double kappa = kappa_of(o.fresh, max_norm, o.start, tally.bound);
    if (!tally.bound.contains("optimizer")) {
      std::string name;
      const double c_opt = update_roundings(*optimizer_of(run), &name);
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
      caught_at = t;
      return false;
    }
    if (max_norm > 0 && norm > max_norm) ++tally.over_bound;
    if (tol.ratio >= tally.worst_ratio) {
      tally.worst_ratio = tol.ratio;
      tally.worst_diff = tol.max_abs_diff;
      tally.worst_where = "step " + std::to_string(t) + " " + describe(tol);
    }
    return true;
  }

  // batch_gradient, judged after the replays (conclude), so that the evidence leads with fresh_gradients.
  void measure_batch(const Observed& o) {
    try {
      const BatchScale b = measure_batch_scale(ctx, opts, before, o.fresh, o.passes, o.gen, run);
      batch_verdict = [b, passes = o.passes](Findings& into) { judge_batch_scale(b, passes, into); };
    } catch (const ProbeNotProvided& e) {
      const std::string why = e.what();
      batch_verdict = [why](Findings& into) { into.recorded(kBatchGradient, "not judged: " + why); };
    }
  }
};

// optimizer_built_once, where the first step of the second epoch (`boundary`) did not break it.
void conclude_once(const StepJudge& j, const std::string& caught, int64_t boundary, bool boundary_judged,
                   const std::string& across, Findings& f) {
  if (caught == kOnce) return;
  if (!caught.empty()) {
    f.recorded(kOnce, "not judged: step " + std::to_string(j.caught_at.value_or(0)) + " was caught first");
  } else if (!j.tally.unexplained.empty()) {
    f.recorded(kOnce, "not judged: the replay model does not reproduce this recipe's update");
  } else if (j.replaced_at && *j.replaced_at == boundary) {
    f.recorded(kOnce, "not judged: the recipe made new parameter tensors in step " + std::to_string(boundary) +
                          " (a new model; the step is watched through hooks on the parameters it began with)");
  } else if (!boundary_judged) {
    f.recorded(kOnce, "not judged: " + across);
  } else {
    f.held(kOnce, "step " + std::to_string(boundary) + ", the first of the second epoch, equals the replay from the "
                  "optimizer and schedule state the recipe checkpointed at the end of the first: the optimizer "
                  "carried its state across the epoch boundary");
  }
}

CheckResult check_step_hygiene(const CheckContext& ctx) {
  Scratch scratch;
  const RunOptions opts = run_options(ctx, ctx.seed);
  std::unique_ptr<Run> run = fresh_run(ctx, opts);
  Findings f;
  StepJudge j{ctx, opts, scratch.file("before-step.pt"), *run, run->clip_norm(), f};
  const int64_t steps = 4;
  // The first step of the second epoch: where an optimizer built inside the epoch loop starts over.
  const int64_t boundary = run->steps_per_epoch();
  int64_t judged = 0;
  bool clean = true;
  for (int64_t t = 0; t < steps && clean; ++t, ++judged) clean = j.judge(t);
  // The first step of the second epoch is judged too (where an optimizer built inside the epoch
  // loop shows); the steps between are run, not judged.
  const std::string across = second_epoch_out_of_reach(boundary);  // why it is not judged
  bool boundary_judged = boundary < steps && judged > boundary;
  if (clean && boundary >= steps && across.empty()) {
    for (int64_t t = steps; t < boundary; ++t) j.losses.push_back(run->train_step().loss);  // run, not judged
    clean = j.judge(boundary);
    ++judged;
    boundary_judged = true;
  }
  nlohmann::json metrics = {{"steps", judged}, {"clip_norm", j.max_norm}, {"fresh_grad_norms", j.tally.norms},
                            {"bound", j.tally.bound}, {"per_step", j.tally.per_step},
                            {"max_ratio_to_bound", j.tally.worst_ratio}, {"steps_per_epoch", boundary}};
  for (const char* k : {"caught", "replay_model"}) {
    if (f.metrics().contains(k)) metrics[k] = f.metrics()[k];
  }
  // What this environment computed, for `compare`: the recipe's run up to the last step judged.
  metrics["fingerprint"] = training_fingerprint(
      "the recipe's run, " + std::to_string(j.losses.size()) + " steps (seed " + std::to_string(ctx.seed) + ")",
      j.losses, run->parameters());
  f.metrics() = metrics;
  const std::string caught = j.caught_at && metrics.contains("caught") ? metrics["caught"].value("promise", std::string()) : "";
  if (caught.empty() || caught == kOnce) conclude(j.tally, judged - (caught.empty() ? 0 : 1), j.max_norm, f);
  conclude_once(j, caught, boundary, boundary_judged, across, f);
  if (j.batch_verdict) j.batch_verdict(f);
  return f.result();
}

}  // namespace
}  // namespace tc

namespace tc {
TC_CHECK(step_hygiene,
         "each update equals an independent computation: fresh gradients each step, "
              "clipped between backward and step, by an optimizer built once")
    ->Promise("fresh_gradients", "each update equals an independent computation from fresh gradients")
    ->Promise("clip_between_backward_and_step", "gradients are clipped between backward and step")
    ->Promise("optimizer_built_once",
              "the optimizer and its schedule are built once, with the model, and carry their state across epochs")
    ->NotJudged("optimizer_built_once", 3)
    ->Promise("batch_gradient",
              "the step's gradient is the gradient of the batch's loss: micro-batches weighed by their share, "
              "none backpropagated twice");
}  // namespace tc
