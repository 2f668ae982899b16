// Broken variants the step_hygiene check must catch ("Zero with set_to_none, clip before you step").
#include <torch/torch.h>

#include "harness/contract/registry.h"
#include "reference/reference_run.h"

namespace tc::variants {

// Gradients are never cleared: each step adds to the last one's.
class NoZeroGrad : public ref::ReferenceRun {
 protected:
  void optimisation_step(const at::Tensor& loss) override {
    loss.backward();
    after_backward();  // the AmpProbe hook, as the reference's step calls it
    torch::nn::utils::clip_grad_norm_(model_->parameters(), config_.clip_norm);
    optimizer_->step();
  }
};

// Fail: backward, step, then clip: the step used the unclipped gradient.
class ClipAfterStep : public ref::ReferenceRun {
 protected:
  void optimisation_step(const at::Tensor& loss) override {
    optimizer_->zero_grad(/*set_to_none=*/true);
    loss.backward();
    after_backward();  // the AmpProbe hook, as the reference's step calls it
    optimizer_->step();
    torch::nn::utils::clip_grad_norm_(model_->parameters(), config_.clip_norm);
  }
};

// zero_grad moved to just before step: the step sees no gradient.
class ZeroGradBeforeStep : public ref::ReferenceRun {
 protected:
  void optimisation_step(const at::Tensor& loss) override {
    loss.backward();
    after_backward();  // the AmpProbe hook, as the reference's step calls it
    torch::nn::utils::clip_grad_norm_(model_->parameters(), config_.clip_norm);
    optimizer_->zero_grad(/*set_to_none=*/true);
    optimizer_->step();
  }
};

}  // namespace tc::variants

TC_RECIPE(tc::variants::NoZeroGrad, "no_zero_grad",
          "gradients are never cleared")
    ->MustBeCaughtBy({"step_hygiene"})
    ->Breaks("step_hygiene", {"fresh_gradients"});
TC_RECIPE(tc::variants::ClipAfterStep, "clip_after_step",
          "gradients are clipped after optimizer.step()")
    ->MustBeCaughtBy({"step_hygiene"})
    ->Breaks("step_hygiene", {"clip_between_backward_and_step"});
TC_RECIPE(tc::variants::ZeroGradBeforeStep, "zero_grad_before_step",
          "zero_grad() sits between backward and step")
    ->MustBeCaughtBy({"step_hygiene"})
    ->Breaks("step_hygiene", {"fresh_gradients"});
