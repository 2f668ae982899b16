#include "reference/model.h"

#include <cmath>

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

std::vector<InitSpec> libtorch_default_init(torch::nn::Module& model) {
  using K = InitSpec::Kind;
  std::vector<InitSpec> specs;
  for (const auto& item : model.named_modules("", /*include_self=*/true)) {
    torch::nn::Module& m = *item.value();
    const auto own = m.named_parameters(/*recurse=*/false);
    if (own.is_empty()) continue;
    const std::string prefix = item.key().empty() ? "" : item.key() + ".";
    const at::Tensor* weight = own.find("weight");
    const bool linear_or_conv = dynamic_cast<torch::nn::LinearImpl*>(&m) || dynamic_cast<torch::nn::Conv1dImpl*>(&m) ||
                                dynamic_cast<torch::nn::Conv2dImpl*>(&m) || dynamic_cast<torch::nn::Conv3dImpl*>(&m);
    const bool norm = dynamic_cast<torch::nn::BatchNorm1dImpl*>(&m) || dynamic_cast<torch::nn::BatchNorm2dImpl*>(&m) ||
                      dynamic_cast<torch::nn::BatchNorm3dImpl*>(&m) || dynamic_cast<torch::nn::LayerNormImpl*>(&m) ||
                      dynamic_cast<torch::nn::GroupNormImpl*>(&m) || dynamic_cast<torch::nn::InstanceNorm1dImpl*>(&m) ||
                      dynamic_cast<torch::nn::InstanceNorm2dImpl*>(&m) || dynamic_cast<torch::nn::InstanceNorm3dImpl*>(&m);
    if (linear_or_conv && weight != nullptr) {
      const double fan_in = static_cast<double>(weight->numel() / weight->size(0));  // in / groups x kernel
      const double bound = 1.0 / std::sqrt(fan_in);
      for (const auto& p : own) specs.push_back({prefix + p.key(), K::kUniform, -bound, bound});
    } else if (norm) {
      for (const auto& p : own) specs.push_back({prefix + p.key(), K::kConstant, p.key() == "weight" ? 1.0 : 0.0, 0.0});
    } else if (dynamic_cast<torch::nn::EmbeddingImpl*>(&m)) {
      for (const auto& p : own) specs.push_back({prefix + p.key(), K::kNormal, 0.0, 1.0});
    } else {
      throw ProbeNotProvided("LibTorch's default initialisation of '" + (item.key().empty() ? std::string("the model") : item.key()) +
                             "' (" + m.name() + ") is not described by libtorch_default_init(): declare its initialisation "
                             "in declared_init()");
    }
  }
  return specs;
}

}  // namespace tc::ref
