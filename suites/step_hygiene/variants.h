// Broken variants the step_hygiene check must catch ("Zero with set_to_none, clip before you step"),
// each a template over the recipe it breaks: registered on the reference (variants.cpp), and built
// on other slots by the tests (suites/tests/slots_test.cpp: on AdamW with a cosine schedule).
#pragma once

#include <algorithm>

#include <torch/nn/utils/clip_grad.h>

#include "reference/reference_run.h"

namespace tc::variants {

// Gradients are never cleared: each step adds to the last one's.
template <class Base = ref::ReferenceRun>
class NoZeroGrad : public Base {
 protected:
  void optimisation_step(const at::Tensor& loss) override {
    loss.backward();
    this->after_backward();  // the AmpProbe hook, as the reference's step calls it
    torch::nn::utils::clip_grad_norm_(this->step_parameters(), this->config_.clip_norm);
    this->optimizer_->step();
  }
};

// Fail: backward, step, then clip: the step used the unclipped gradient.
template <class Base = ref::ReferenceRun>
class ClipAfterStep : public Base {
 protected:
  void optimisation_step(const at::Tensor& loss) override {
    this->optimizer_->zero_grad(/*set_to_none=*/true);
    loss.backward();
    this->after_backward();  // the AmpProbe hook, as the reference's step calls it
    this->optimizer_->step();
    torch::nn::utils::clip_grad_norm_(this->step_parameters(), this->config_.clip_norm);
  }
};

// zero_grad moved to just before step: the step sees no gradient.
template <class Base = ref::ReferenceRun>
class ZeroGradBeforeStep : public Base {
 protected:
  void optimisation_step(const at::Tensor& loss) override {
    loss.backward();
    this->after_backward();  // the AmpProbe hook, as the reference's step calls it
    torch::nn::utils::clip_grad_norm_(this->step_parameters(), this->config_.clip_norm);
    this->optimizer_->zero_grad(/*set_to_none=*/true);
    this->optimizer_->step();
  }
};

// Fail: gradient accumulation over 4 micro-batches (the micro-batch slot) whose mean losses are
// backpropagated undivided: the step's gradient is the sum of four mean-loss gradients, 4x the
// batch's (the "forgot to divide by accumulation_steps" of real loops).
template <class Base = ref::ReferenceRun>
class UndividedAccumulation : public Base {
 protected:
  std::vector<int64_t> micro_batch_sizes(int64_t batch) const override {
    return ref::ReferenceRun::even_split(batch, std::min<int64_t>(4, batch));
  }
  at::Tensor weigh_micro_batch(const at::Tensor& loss, int64_t, int64_t) override { return loss; }
};

}  // namespace tc::variants
