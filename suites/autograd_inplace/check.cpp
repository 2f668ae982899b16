// autograd_inplace: training never mutates a tensor that autograd saved.
//
// 1. no_inplace_on_saved: LibTorch's version counters detect an in-place write to a saved tensor
//    at backward; the check trains an epoch and reports that error as evidence.
// 2. gradient_recomputes: a write that bumps no counter (through data_ptr or Python's `.data`, a
//    foreign library, a reused buffer) silently corrupts the gradient. For the first steps, the
//    gradient train_step's backward produced (hooks on the parameters) must equal a recomputation:
//    the same batch (Run::last_batch, copied before the forward), the parameters, buffers and
//    default generators as they were when the step began, a fresh forward (Run::forward_train),
//    the recipe's loss (Run::training_loss) and backward; then the run is put back as it was.
//
//    The bound. The same mathematics computed twice differs only by rounding: each layer's forward
//    and backward is a sum of at most n products (n: the batch's element count plus the largest
//    parameter's, longer than any sum of a convolution or linear layer here), whose error is at
//    most gamma_n = n u times the sum of the products' magnitudes, and a step chains at most one
//    such layer per parameter tensor (m of them) forward and back. Normwise, against the tensor's
//    largest gradient element G (the magnitude the sums add up to where they do not cancel):
//        |g_step - g_recomputed| <= 2 m n u (|g| + G)
//    u the parameters' unit roundoff. A correct recipe computes it bitwise (the same code twice) or
//    within a few ulps (an equivalent loss written another way); a gradient made from a mutated
//    tensor is off by the size of the mutation, hundreds of times the bound (the margin is printed).
#include <algorithm>

#include <torch/torch.h>

#include <ATen/Context.h>

#include "harness/util/text_format.h"
#include "suites/support/generators.h"
#include "suites/support/hooks.h"
#include "suites/support/kit.h"
#include "suites/support/tensor_compare.h"
#include "suites/support/tolerance.h"

namespace tc {
namespace {

constexpr const char* kInplace = "no_inplace_on_saved";
constexpr const char* kRecompute = "gradient_recomputes";
constexpr int64_t kRecomputedSteps = 3;

void copy_into(const NamedTensors& live, const NamedTensors& values) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < live.size() && i < values.size(); ++i) {
    if (live[i].second.defined() && values[i].second.defined()) live[i].second.copy_(values[i].second);
  }
}

struct Recomputed {
  NamedTensors step, recomputed, bound;
  double n = 0, m = 0, u = 0;
  // Set when the recomputation cannot stand for the step: why (the gradients are then not judged).
  std::string not_reproduced;
  double loss = 0.0;  // the recomputed loss
};

// Whether the forward draws random numbers: two forwards of x (in train mode, no autograd) from
// other generator states give other outputs. Buffers and generators are left as `buffers_at` and
// `gen` say.
bool forward_draws_random_numbers(Run& run, const at::Tensor& x, const NamedTensors& buffers,
                                  const NamedTensors& buffers_at, const GeneratorStates& gen) {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> outs;
  for (int k = 0; k < 2; ++k) {
    copy_into(buffers, buffers_at);
    restore_generators(gen);
    if (k == 1) {
      // Another state of every default generator the forward could draw from.
      at::Generator cpu = at::detail::getDefaultCPUGenerator();
      cpu.set_current_seed(0x5eed'0001ULL);
      if (gen.device.defined()) {
        at::Generator device = at::globalContext().defaultGenerator(c10::Device(gen.type));
        device.set_current_seed(0x5eed'0002ULL);
      }
    }
    outs.push_back(run.forward_train(x).detach().cpu());
  }
  return !torch::equal(outs[0], outs[1]);
}

// The gradient of the step just taken, recomputed from the state it began in; the run is left as
// the step left it. The recomputation stands for the step when its loss equals the step's loss (to
// the rounding of a reduction over the output's elements: (numel + 8) u |loss|), or when the
// forward draws no random numbers (then nothing but the tensors below shapes it). Otherwise the
// step drew random numbers before its forward (an augmentation on the device, a sample picked for a
// log), the dropout masks of its forward cannot be given to the recomputation, and the gradients
// are not judged.
//
// A step of k > 1 backward passes (gradient accumulation) is recomputed as k contiguous near-equal
// micro-batches, each loss weighed by its share, one after another (the order in which such a step
// draws its masks); it stands for the step only when its loss equals the step's (the recipe split
// and weighed the same way), else the gradients are not judged: its micro-batches' BatchNorm
// statistics are not the recomputation's.
Recomputed recompute(Run& run, const NamedTensors& params_before, const NamedTensors& buffers_before,
                     const GeneratorStates& gen_before, const std::vector<at::Tensor>& step_grads,
                     double step_loss, int64_t passes) {
  const NamedTensors params = run.parameters(), buffers = run.buffers();
  const NamedTensors params_after = snapshot(params), buffers_after = snapshot(buffers);
  const GeneratorStates gen_after = save_generators(gen_before.type);
  const auto [x, y] = run.last_batch();
  copy_into(params, params_before);
  copy_into(buffers, buffers_before);
  restore_generators(gen_before);
  std::vector<at::Tensor> inputs;
  std::vector<size_t> index;
  for (size_t i = 0; i < params.size(); ++i) {
    if (i < step_grads.size() && step_grads[i].defined()) {
      inputs.push_back(params[i].second);
      index.push_back(i);
    }
  }
  std::vector<at::Tensor> grads;
  Recomputed r;
  int64_t output_elements = 0;
  const int64_t k = std::max<int64_t>(1, std::min<int64_t>(passes, x.size(0)));
  for (int64_t part = 0, start = 0; part < k; ++part) {
    const int64_t n = x.size(0) / k + (part < x.size(0) % k ? 1 : 0);
    const at::Tensor out = run.forward_train(k == 1 ? x : x.narrow(0, start, n));
    output_elements += out.numel();
    at::Tensor loss = run.training_loss(out, k == 1 ? y : y.narrow(0, start, n));
    if (k > 1) loss = loss * (static_cast<double>(n) / static_cast<double>(x.size(0)));
    r.loss += loss.item<double>();
    const std::vector<at::Tensor> g = torch::autograd::grad({loss}, inputs, /*grad_outputs=*/{}, /*retain_graph=*/false,
                                                            /*create_graph=*/false, /*allow_unused=*/true);
    if (grads.empty()) grads.resize(g.size());
    for (size_t j = 0; j < g.size(); ++j) {
      if (g[j].defined()) grads[j] = grads[j].defined() ? grads[j] + g[j] : g[j];
    }
    start += n;
  }
  const double u_loss = unit_roundoff_of(c10::kFloat);
  const double loss_bound = static_cast<double>(output_elements + 8 * k) * u_loss * std::abs(step_loss);
  if (k > 1 && std::abs(r.loss - step_loss) > loss_bound) {
    r.not_reproduced = "the step ran " + std::to_string(k) + " backward passes (micro-batches), and their recomputation "
                       "as " + std::to_string(k) + " contiguous near-equal micro-batches weighed by their share has the "
                       "loss " + fmt::sig(r.loss, 9) + " against the step's " + fmt::sig(step_loss, 9) + " (bound " +
                       fmt::sig(loss_bound, 3) + "): the recipe splits or weighs its micro-batches otherwise, so the "
                       "recomputation does not stand for them (step_hygiene's batch_gradient judges their sum's scale)";
  } else if (std::abs(r.loss - step_loss) > loss_bound &&
      forward_draws_random_numbers(run, x, buffers, buffers_before, gen_before)) {
    r.not_reproduced = "the forward draws random numbers (two forwards of the step's batch from other generator "
                       "states differ), and from the generator states the step began with the recomputed loss is " +
                       fmt::sig(r.loss, 9) + " against the step's " + fmt::sig(step_loss, 9) +
                       " (bound " + fmt::sig(loss_bound, 3) + "): the step draws random numbers before its "
                       "forward, so its dropout masks cannot be given to a recomputation";
  }
  copy_into(params, params_after);
  copy_into(buffers, buffers_after);
  restore_generators(gen_after);
  if (!r.not_reproduced.empty()) return r;

  int64_t largest = 0;
  for (const auto& [n, p] : params) largest = std::max<int64_t>(largest, p.numel());
  r.n = static_cast<double>(x.numel() + largest);
  r.m = static_cast<double>(inputs.size());
  for (size_t k = 0; k < index.size(); ++k) {
    const std::string& name = params[index[k]].first;
    const at::Tensor g = step_grads[index[k]].to(torch::kDouble);
    const at::Tensor rg = grads[k].defined() ? grads[k].detach().cpu().to(torch::kDouble) : torch::zeros_like(g);
    r.u = std::max(r.u, unit_roundoff_of(params[index[k]].second.scalar_type()));
    const double big = g.numel() ? g.abs().max().item<double>() : 0.0;
    r.step.emplace_back(name, g);
    r.recomputed.emplace_back(name, rg);
    r.bound.emplace_back(name, 2 * r.m * r.n * unit_roundoff_of(params[index[k]].second.scalar_type()) * (g.abs() + big));
  }
  return r;
}

// What the judged steps showed of the recomputation.
struct RecomputeTally {
  nlohmann::json per_step = nlohmann::json::array(), bound;
  std::string not_judged;  // why the recomputation could not stand for a step
  std::optional<std::string> broken;
  double broken_ratio = 0.0, worst = 0.0;
  std::string worst_where;
  bool done() const { return !not_judged.empty() || broken.has_value(); }
};

// One step with gradient hooks on the parameters (frozen ones take none), then its recomputation
// judged. Returns the step's record.
StepRecord judged_step(Run& run, c10::DeviceType device, int64_t step, RecomputeTally& tally, Findings& f) {
  const NamedTensors params = run.parameters();
  const NamedTensors params_before = snapshot(params), buffers_before = snapshot(run.buffers());
  const GeneratorStates gen = save_generators(device);
  std::vector<at::Tensor> fresh(params.size());
  std::vector<int64_t> calls(params.size(), 0);  // backward passes that reached each parameter
  HookSet hooks;
  for (size_t i = 0; i < params.size(); ++i) {
    hooks.add(params[i].second, [&fresh, &calls, i](const at::Tensor& g) {
      at::Tensor c = g.detach().cpu().clone();
      fresh[i] = fresh[i].defined() ? fresh[i] + c : c;
      ++calls[i];
    });
  }
  const StepRecord r = run.train_step();
  hooks.remove_all();
  if (!std::isfinite(r.loss)) return r;
  Recomputed rc;
  const int64_t passes = calls.empty() ? 1 : *std::max_element(calls.begin(), calls.end());
  try {
    rc = recompute(run, params_before, buffers_before, gen, fresh, r.loss, passes);
  } catch (const ProbeNotProvided& e) {
    tally.not_judged = e.what();
    return r;
  }
  if (!rc.not_reproduced.empty()) {
    tally.not_judged = "at step " + std::to_string(step) + " " + rc.not_reproduced;
    return r;
  }
  const Tolerance t = compare_within(rc.step, rc.recomputed, rc.bound);
  tally.bound = {{"formula", "2 m n u (|g| + max|g|)"}, {"m", rc.m}, {"n", rc.n}, {"unit_roundoff", rc.u}};
  tally.per_step.push_back({{"step", step}, {"ratio_to_bound", t.ratio}, {"max_abs_diff", t.max_abs_diff},
                            {"worst", describe(t)}});
  if (!t.within()) {
    // A gradient off by one common factor (the loss backpropagated twice, or scaled) is no in-place
    // write: the scaled recomputation then meets the bound, and the scale is step_hygiene's to judge.
    double gr = 0.0, rr = 0.0;
    for (size_t j = 0; j < rc.step.size(); ++j) {
      gr += (rc.step[j].second * rc.recomputed[j].second).sum().item<double>();
      rr += rc.recomputed[j].second.pow(2).sum().item<double>();
    }
    const double c = rr > 0 ? gr / rr : 0.0;
    NamedTensors scaled;
    for (const auto& [n, g] : rc.recomputed) scaled.emplace_back(n, g * c);
    if (passes > 1) {
      // Micro-batches weighed otherwise than by their share (or split otherwise) give the same loss
      // and another gradient: a difference here shows no in-place write.
      tally.not_judged = "at step " + std::to_string(step) + " the sum of the step's " + std::to_string(passes) +
                         " backward passes differs from their recomputation as micro-batches weighed by their "
                         "share by " + fmt::sig(t.ratio, 3) + "x the bound: the recipe weighs its micro-batches "
                         "otherwise (step_hygiene's batch_gradient judges the sum's scale), so the difference "
                         "shows no in-place write";
      return r;
    }
    if (c > 0 && std::abs(c - 1.0) > 1e-3 && compare_within(rc.step, scaled, rc.bound).within()) {
      tally.not_judged = "at step " + std::to_string(step) + " the gradient backward produced is " + fmt::sig(c, 6) +
                         "x a fresh forward and backward of the same batch, and equals that scaled within the bound: "
                         "the loss backpropagated is scaled (step_hygiene's batch_gradient judges the scale), and no "
                         "in-place write is shown";
      return r;
    }
    f.metrics()["caught"] = {{"step", step}, {"margin", t.ratio}, {"max_abs_diff", t.max_abs_diff}};
    tally.broken_ratio = t.ratio;
    tally.broken = "step " + std::to_string(step) + ": the gradient backward produced differs from a fresh "
                   "forward and backward of the same batch from the same parameters by max |diff| " +
                   fmt::sig(t.max_abs_diff, 3) + ", " + fmt::sig(t.ratio, 3) + "x the bound " +
                   "2mnu(|g| + max|g|) (" + describe(t) + "): a tensor autograd saved was changed between the "
                   "forward and the backward without LibTorch's version counter seeing it";
  } else if (t.ratio >= tally.worst) {
    tally.worst = t.ratio;
    tally.worst_where = "step " + std::to_string(step) + " " + describe(t);
  }
  return r;
}

void conclude(const RecomputeTally& tally, int64_t steps, Findings& f) {
  f.metrics()["steps"] = steps;
  f.metrics()["recomputed"] = {{"per_step", tally.per_step}, {"bound", tally.bound},
                               {"max_ratio_to_bound", tally.worst}};
  f.held(kInplace, std::to_string(steps) +
                       " training steps: no tensor saved for backward was modified in place "
                       "(LibTorch's version counters never fired)");
  if (tally.broken) {
    f.broken(kRecompute, *tally.broken, tally.broken_ratio, 1.0);
  } else if (!tally.not_judged.empty()) {
    f.recorded(kRecompute, "gradient recomputation not judged: " + tally.not_judged);
  } else {
    f.held(kRecompute,
           "steps 0 to " + std::to_string(std::min(kRecomputedSteps, steps) - 1) +
               ": each step's gradient equals a fresh forward and backward of its batch within the bound "
               "2mnu(|g| + max|g|) (m = " + fmt::sig(tally.bound.value("m", 0.0)) +
               ", n = " + fmt::sig(tally.bound.value("n", 0.0), 9) + ", u = " +
               fmt::sig(tally.bound.value("unit_roundoff", 0.0), 3) + "): largest deviation " +
               fmt::sig(tally.worst, 3) + " of the bound (" + tally.worst_where + ")",
           tally.worst, 1.0);
  }
}

CheckResult check_autograd_inplace(const CheckContext& ctx) {
  const RunOptions opts = run_options(ctx, ctx.seed);
  std::unique_ptr<Run> run = fresh_run(ctx, opts);
  const int64_t steps = run->steps_per_epoch();
  int64_t done = 0;
  Findings f;
  RecomputeTally tally;
  try {
    for (; done < steps; ++done) {
      const StepRecord r = done < kRecomputedSteps && !tally.done()
                               ? judged_step(*run, opts.device.type(), done, tally, f)
                               : run->train_step();
      if (!std::isfinite(r.loss)) throw HarnessError("non-finite loss at step " + std::to_string(done));
    }
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    if (what.find("modified by an inplace operation") == std::string::npos) throw;
    f.metrics()["failed_step"] = done;
    f.broken(kInplace, "step " + std::to_string(done) + ": " + what.substr(0, what.find("Hint:")));
    f.recorded(kRecompute, "gradient recomputation not judged: training stopped at step " + std::to_string(done));
    return f.result();
  }
  conclude(tally, steps, f);
  return f.result();
}

}  // namespace
}  // namespace tc

namespace tc {
TC_CHECK(autograd_inplace,
         "training never mutates a tensor autograd saved; each step's gradient equals a fresh "
              "forward and backward of its batch")
    ->Promise("no_inplace_on_saved", "training never mutates a tensor autograd saved (version counters)")
    ->Promise("gradient_recomputes",
              "each step's gradient equals a fresh forward and backward of its batch within a floating-point bound")
    // LibTorch's version-counter error: the practice this check owns, wherever a cell meets it.
    ->DetectsByThrowing("no_inplace_on_saved", "modified by an inplace operation")
    // inplace_on_saved stops training at step 0 (no_inplace_on_saved's finding): nothing to recompute.
    ->NotJudged("gradient_recomputes", 1);
}  // namespace tc
