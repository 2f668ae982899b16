#include "reference/model.h"

#include <torch/torch.h>

#include "reference/recompute.h"

namespace tc::ref {

namespace nn = torch::nn;

ImageClassifierImpl::ImageClassifierImpl(int64_t num_classes, int64_t image_size, double dropout,
                                         int64_t channels)
    : num_classes(num_classes), image_size(image_size), channels(channels) {
  features = register_module(
      "features", nn::Sequential(nn::Conv2d(nn::Conv2dOptions(3, channels, 3).padding(1)),
                                 nn::BatchNorm2d(channels), nn::ReLU(), nn::MaxPool2d(2)));
  features_segment = [this](const torch::Tensor& t) { return features->forward(t); };
  const int64_t half = image_size / 2;
  classifier = register_module(
      "classifier",
      nn::Sequential(nn::Dropout(dropout), nn::Linear(channels * half * half, num_classes)));
}

torch::Tensor ImageClassifierImpl::extract_features(const torch::Tensor& x) {
  return recompute_features && is_training()
             ? recompute(features_segment, x, features->parameters())  // (B, C, H/2, W/2)
             : features->forward(x);                                   // (B, C, H/2, W/2)
}

torch::Tensor ImageClassifierImpl::forward(torch::Tensor x) {
  x = extract_features(x);           // (B, C, H/2, W/2)
  x = x.flatten(/*start_dim=*/1);    // (B, C * H/2 * W/2)
  return classifier->forward(x);     // (B, num_classes)
}

void init_weights(nn::Module& module) {
  torch::NoGradGuard no_grad;
  module.apply([](nn::Module& m) {
    if (auto* conv = m.as<nn::Conv2d>()) {
      nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
      if (conv->bias.defined()) nn::init::zeros_(conv->bias);
    } else if (auto* bn = m.as<nn::BatchNorm2d>()) {
      nn::init::ones_(bn->weight);
      nn::init::zeros_(bn->bias);
    } else if (auto* lin = m.as<nn::Linear>()) {
      nn::init::normal_(lin->weight, 0.0, 0.01);
      nn::init::zeros_(lin->bias);
    }
  });
}

}  // namespace tc::ref
