// Deriving a model from the reference's classifier: a recipe that replaces forward() derives its
// Impl from tc::ref::ImageClassifierImpl and builds it here (explicitly initialised like the
// reference's). Installed with the recipe API (include/torchconform/reference/).
//
//   struct MyImpl : tc::ref::ImageClassifierImpl {
//     using ImageClassifierImpl::ImageClassifierImpl;
//     torch::Tensor forward(torch::Tensor x) override {
//       x = extract_features(x);  // not features->forward(x): keeps activation checkpointing
//       return classifier->forward(x.flatten(1));
//     }
//   };
//   class MyRun : public tc::ref::ReferenceRun {
//    protected:
//     tc::ref::ImageClassifier build_model() override {
//       return tc::ref::make_classifier<MyImpl>(config_.data.classes, config_.data.image_size, config_.dropout);
//     }
//   };
#pragma once

#include <memory>

#include "reference/model.h"

namespace tc::ref {

template <typename Impl, typename... Args>
ImageClassifier make_classifier(Args&&... args) {
  ImageClassifier m(std::shared_ptr<ImageClassifierImpl>(std::make_shared<Impl>(std::forward<Args>(args)...)));
  init_weights(*m);
  return m;
}

}  // namespace tc::ref
