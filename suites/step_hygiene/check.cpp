// step_hygiene: every update equals an independent computation of it. The check records the
// fresh gradient of each step's backward with hooks on the parameters, then replays the step from
// a checkpoint taken just before it: that gradient, clipped to the recipe's bound with LibTorch's
// clip_grad_norm_, one step of the recipe's own optimizer. The recipe's update must be bitwise the
// same: gradients fresh (not accumulated), clipping between backward and step, a step that saw them.
#include <torch/torch.h>

#include "suites/support/kit.h"
#include "suites/support/tensor_compare.h"

namespace tc {
namespace {

constexpr const char* kFresh = "fresh_gradients";
constexpr const char* kClip = "clip_between_backward_and_step";

// Why the recipe's update differs, read off the gradient it left on the parameters: the promise
// that shows broken, and whether the gradient left is this step's own (fresh).
struct Diagnosis {
  std::string promise;
  std::string text;
  bool gradient_is_fresh = false;
};

Diagnosis diagnose(const NamedTensors& params, const std::vector<at::Tensor>& fresh,
                   const std::vector<at::Tensor>& clipped, double fresh_norm, double max_norm) {
  bool none = true, equals_clipped = true, equals_fresh = true;
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& g = params[i].second.grad();
    if (!g.defined()) continue;
    none = false;
    at::Tensor gc = g.detach().cpu();
    if (!torch::equal(gc, clipped[i])) equals_clipped = false;
    if (!torch::equal(gc, fresh[i])) equals_fresh = false;
  }
  if (none) return {kFresh, "the step saw no gradient: gradients were cleared between backward and step"};
  if (equals_clipped && fresh_norm > max_norm) {
    return {kClip,
            "the gradient left on the parameters is this step's, clipped, but the update used the "
            "unclipped one (norm " + format_double(fresh_norm, 4) + " > " + format_double(max_norm, 4) +
                "): clipping came after the step",
            true};
  }
  if (equals_clipped) return {kFresh, "the gradients were right but the update was not made from them"};
  if (equals_fresh && fresh_norm > max_norm) {
    return {kClip,
            "the gradient left after the step is this step's, unclipped (norm " + format_double(fresh_norm, 4) +
                " > " + format_double(max_norm, 4) + "): clipping did not happen between backward and step",
            true};
  }
  return {kFresh, "the gradient the step used is not this step's alone: gradients accumulate across steps "
                  "(not cleared before backward)"};
}

// One step of the recipe against its independent computation from the checkpoint `before`.
struct Step {
  double fresh_norm = 0.0;
  std::optional<TensorDifference> diff;  // nullopt: bitwise equal
  Diagnosis diagnosis;                   // when they differ
};

Step replay_step(const CheckContext& ctx, const RunOptions& opts, Run& run, const std::string& before,
                 double max_norm) {
  run.save_checkpoint(before);
  NamedTensors params = run.parameters();
  std::vector<at::Tensor> fresh(params.size());
  std::vector<unsigned> hooks;
  for (size_t i = 0; i < params.size(); ++i) {
    hooks.push_back(params[i].second.register_hook([&fresh, i](const at::Tensor& g) {
      at::Tensor c = g.detach().cpu().clone();
      fresh[i] = fresh[i].defined() ? fresh[i] + c : c;  // several backwards in one step add up
    }));
  }
  run.train_step();
  for (size_t i = 0; i < params.size(); ++i) params[i].second.remove_hook(hooks[i]);

  // The independent computation.
  std::unique_ptr<Run> replay = ctx.make_run();
  replay->setup(opts);
  replay->load_checkpoint(before);
  NamedTensors rparams = replay->parameters();
  std::vector<at::Tensor> grads;
  for (size_t i = 0; i < rparams.size(); ++i) {
    if (!fresh[i].defined()) continue;  // a parameter this step's loss does not reach
    rparams[i].second.mutable_grad() = fresh[i].to(rparams[i].second.device()).clone();
    grads.push_back(rparams[i].second.grad());
  }
  Step s;
  for (const auto& g : grads) s.fresh_norm += g.to(torch::kDouble).pow(2).sum().item<double>();
  s.fresh_norm = std::sqrt(s.fresh_norm);
  if (max_norm > 0) {
    std::vector<at::Tensor> with_grad;
    for (auto& [n, p] : rparams) if (p.grad().defined()) with_grad.push_back(p);
    torch::nn::utils::clip_grad_norm_(with_grad, max_norm);
  }
  std::vector<at::Tensor> clipped;
  for (size_t i = 0; i < rparams.size(); ++i) {
    clipped.push_back(rparams[i].second.grad().defined() ? rparams[i].second.grad().detach().cpu()
                                                        : at::Tensor());
  }
  replay->optimizer().step();

  s.diff = first_tensor_difference(snapshot(replay->parameters()), snapshot(run.parameters()));
  if (s.diff) s.diagnosis = diagnose(params, fresh, clipped, s.fresh_norm, max_norm);
  return s;
}

CheckResult check_step_hygiene(const CheckContext& ctx) {
  ScratchDir scratch;
  const std::string before = scratch.file("before-step.pt");
  const RunOptions opts = run_options(ctx, ctx.seed);
  std::unique_ptr<Run> run = ctx.make_run();
  run->setup(opts);
  const double max_norm = run->clip_norm();
  const int64_t steps = 4;

  Findings f;
  nlohmann::json norms = nlohmann::json::array();
  int64_t over_bound = 0;  // steps whose fresh gradient norm exceeded the clip bound
  for (int64_t t = 0; t < steps; ++t) {
    const Step s = replay_step(ctx, opts, *run, before, max_norm);
    norms.push_back(s.fresh_norm);
    if (s.diff) {
      const std::string at = "step " + std::to_string(t);
      f.broken(s.diagnosis.promise, at + ": parameter '" + s.diff->name +
                                        "' differs from the independent update (max |diff| " +
                                        format_double(s.diff->max_abs_diff, 3) + "): " + s.diagnosis.text +
                                        " (later steps not judged: they start from a different place)");
      if (s.diagnosis.promise == kClip && s.diagnosis.gradient_is_fresh) {
        f.held(kFresh, (t == 0 ? std::string("step 0: its gradient was its own")
                               : "steps 0 to " + std::to_string(t) + ": each step's gradient was its own") +
                           ", not accumulated");
      }
      break;
    }
    if (max_norm > 0 && s.fresh_norm > max_norm) ++over_bound;
  }
  f.metrics() = {{"steps", steps}, {"clip_norm", max_norm}, {"fresh_grad_norms", norms}};
  if (f.any_broken()) return f.result();
  f.held(kFresh, std::to_string(steps) + " updates bitwise equal to fresh gradient -> clip to " +
                     format_double(max_norm) + " -> optimizer step (gradient norms " + norms.dump() + ")");
  if (max_norm <= 0) {
    f.recorded(kClip, "not judged: the recipe does not clip (clip_norm " + format_double(max_norm) + ")");
  } else if (over_bound == 0) {
    f.recorded(kClip, "not judged: no step's fresh gradient norm exceeded " + format_double(max_norm) +
                          ", so clipping had nothing to do");
  } else {
    f.held(kClip, "in " + std::to_string(over_bound) + " of " + std::to_string(steps) +
                      " steps the fresh gradient norm exceeded " + format_double(max_norm) +
                      " and the update was made from the clipped gradient");
  }
  return f.result();
}

}  // namespace
}  // namespace tc

namespace tc {
TC_CHECK(step_hygiene,
         "each update equals an independent computation: fresh gradients each step, "
              "clipped between backward and step")
    ->Promise("fresh_gradients", "each update equals an independent computation from fresh gradients")
    ->Promise("clip_between_backward_and_step", "gradients are clipped between backward and step");
}  // namespace tc
