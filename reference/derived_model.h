// Builds the reference classifier with another forward (a variant's Impl derived from
// ImageClassifierImpl), explicitly initialised like the reference's.
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
