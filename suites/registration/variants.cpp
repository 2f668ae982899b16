// Broken variant the registration check must catch ("Build layers in __init__, never in forward").
#include <torch/torch.h>

#include "harness/contract/registry.h"
#include "reference/derived_model.h"
#include "reference/reference_run.h"

namespace tc::variants {

// The classifier's Linear is made inside forward: fresh weights on every call, invisible to the
// optimizer and to the state dict (the registered one is never used).
struct LayerInForwardImpl : ref::ImageClassifierImpl {
  using ImageClassifierImpl::ImageClassifierImpl;
  torch::Tensor forward(torch::Tensor x) override {
    x = extract_features(x);   // (B, C, H/2, W/2), checkpointed when the recipe asks
    x = x.flatten(1);          // (B, C * H/2 * W/2)
    torch::nn::Linear fc(x.size(1), num_classes);
    fc->to(x.device());
    return fc->forward(x);     // (B, num_classes)
  }
};

class LayerInForward : public ref::ReferenceRun {
 protected:
  ref::ImageClassifier build_model() override {
    return ref::make_classifier<LayerInForwardImpl>(config_.data.classes, config_.data.image_size, config_.dropout);
  }
};

}  // namespace tc::variants

TC_RECIPE(tc::variants::LayerInForward, "layer_in_forward",
          "a layer is constructed inside forward()")
    ->MustBeCaughtBy({"registration"})
    ->Breaks("registration", {"parameters_registered", "eval_forwards_agree", "state_dict_round_trip"});
