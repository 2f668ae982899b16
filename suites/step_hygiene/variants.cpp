// The step_hygiene variants (variants.h) registered on the reference.
#include "suites/step_hygiene/variants.h"

#include "harness/contract/registry.h"

TC_RECIPE(tc::variants::NoZeroGrad<>, "no_zero_grad",
          "gradients are never cleared")
    ->MustBeCaughtBy({"step_hygiene"})
    ->Breaks("step_hygiene", {"fresh_gradients"});
TC_RECIPE(tc::variants::ClipAfterStep<>, "clip_after_step",
          "gradients are clipped after optimizer.step()")
    ->MustBeCaughtBy({"step_hygiene"})
    ->Breaks("step_hygiene", {"clip_between_backward_and_step"});
TC_RECIPE(tc::variants::ZeroGradBeforeStep<>, "zero_grad_before_step",
          "zero_grad() sits between backward and step")
    ->MustBeCaughtBy({"step_hygiene"})
    ->Breaks("step_hygiene", {"fresh_gradients"});
TC_RECIPE(tc::variants::UndividedAccumulation<>, "undivided_accumulation",
          "gradient accumulation over 4 micro-batches whose losses are not divided")
    ->MustBeCaughtBy({"step_hygiene"})
    ->Breaks("step_hygiene", {"batch_gradient"});
