// Broken variant the grad_checkpointing check must catch ("Gradient checkpointing ... must be
// called with use_reentrant=False").
#include <torch/torch.h>

#include "harness/contract/registry.h"
#include "reference/recompute.h"
#include "reference/derived_model.h"
#include "reference/reference_run.h"

namespace tc::variants {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The use_reentrant=True shape: the function's only input is x, which it detaches and recomputes
// from in backward. The parameters inside are not inputs, so when x does not require grad (the
// first segment, fed with data) autograd never calls backward and they get no gradient.
struct ReentrantRecompute : torch::autograd::Function<ReentrantRecompute> {
  static variable_list forward(AutogradContext* ctx, const ref::Segment* segment, const at::Tensor& x) {
    ctx->saved_data["segment"] = reinterpret_cast<int64_t>(segment);
    ctx->save_for_backward({x});
    torch::NoGradGuard no_grad;
    return {(*segment)(x)};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto* segment = reinterpret_cast<const ref::Segment*>(ctx->saved_data["segment"].toInt());
    at::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    at::Tensor out;
    {
      torch::AutoGradMode enable(true);
      out = (*segment)(x);
    }
    torch::autograd::backward({out}, {grad_outputs[0]});
    return {at::Tensor(), x.grad()};
  }
};

struct ReentrantImpl : ref::ImageClassifierImpl {
  using ImageClassifierImpl::ImageClassifierImpl;
  torch::Tensor forward(torch::Tensor x) override {
    x = recompute_features && is_training() ? ReentrantRecompute::apply(&features_segment, x)[0]
                                            : features->forward(x);
    x = x.flatten(1);
    return classifier->forward(x);
  }
};

class ReentrantDropsParamGrads : public ref::ReferenceRun {
 protected:
  ref::ImageClassifier build_model() override {
    return ref::make_classifier<ReentrantImpl>(config_.data.classes, config_.data.image_size, config_.dropout);
  }
};

// A model whose forward was rewritten and no longer honours the option: it accepts
// activation_checkpointing (the flag is set) but always runs the features plainly, so every
// activation is kept for backward as without it.
struct IgnoresCheckpointingImpl : ref::ImageClassifierImpl {
  using ImageClassifierImpl::ImageClassifierImpl;
  torch::Tensor forward(torch::Tensor x) override {
    x = features->forward(x);
    x = x.flatten(1);
    return classifier->forward(x);
  }
};

class IgnoresCheckpointing : public ref::ReferenceRun {
 protected:
  ref::ImageClassifier build_model() override {
    return ref::make_classifier<IgnoresCheckpointingImpl>(config_.data.classes, config_.data.image_size,
                                                          config_.dropout);
  }
};

}  // namespace tc::variants

TC_RECIPE(tc::variants::ReentrantDropsParamGrads, "reentrant_drops_param_grads",
          "recomputation that detaches its input (use_reentrant=True): parameters inside "
                   "get no gradient when the input needs none")
    ->MustBeCaughtBy({"grad_checkpointing"})
    ->Breaks("grad_checkpointing", {"gradients_equal"});
TC_RECIPE(tc::variants::IgnoresCheckpointing, "ignores_checkpointing",
          "a forward that never recomputes: activation_checkpointing is accepted and has no effect")
    ->MustBeCaughtBy({"grad_checkpointing"})
    ->Breaks("grad_checkpointing", {"activation_memory_lower"});
