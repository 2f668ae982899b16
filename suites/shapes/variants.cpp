// Broken variant the shapes check must catch ("Track the shape at every step").
#include <torch/torch.h>

#include "harness/contract/registry.h"
#include "reference/derived_model.h"
#include "reference/reference_run.h"

namespace tc::variants {

// Fail: x.view(x.size(0), -1) instead of flatten(start_dim=1): breaks on a non-contiguous tensor.
struct ViewFlattenImpl : ref::ImageClassifierImpl {
  using ImageClassifierImpl::ImageClassifierImpl;
  torch::Tensor forward(torch::Tensor x) override {
    x = extract_features(x);
    x = x.view({x.size(0), -1});
    return classifier->forward(x);
  }
};

class ViewFlatten : public ref::ReferenceRun {
 protected:
  ref::ImageClassifier build_model() override {
    return ref::make_classifier<ViewFlattenImpl>(config_.data.classes, config_.data.image_size, config_.dropout);
  }
};

}  // namespace tc::variants

TC_RECIPE(tc::variants::ViewFlatten, "view_flatten",
          "flattens with view(B, -1) instead of flatten(1)")
    ->MustBeCaughtBy({"shapes"})
    ->Breaks("shapes", {"non_contiguous_input"});
