// The reference model: a small CNN like the seeds' ImageClassifier.
#pragma once

#include <functional>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/pimpl.h>

namespace tc::ref {

struct ImageClassifierImpl : torch::nn::Module {
  // Input (B, 3, image_size, image_size), image_size even.
  ImageClassifierImpl(int64_t num_classes, int64_t image_size, double dropout = 0.5,
                      int64_t channels = 16);

  virtual ~ImageClassifierImpl() = default;
  virtual torch::Tensor forward(torch::Tensor x);

  // Recompute the features' activations in backward instead of keeping them (training only).
  bool recompute_features = false;
  std::function<torch::Tensor(const torch::Tensor&)> features_segment;

  const int64_t num_classes;
  const int64_t image_size;
  const int64_t channels;

  torch::nn::Sequential features{nullptr};    // Conv-BN-ReLU-MaxPool
  torch::nn::Sequential classifier{nullptr};  // Dropout-Linear

 protected:
  // The feature extractor's step, (B, 3, H, W) -> (B, C, H/2, W/2), with activation checkpointing
  // when the recipe asks for it (recompute_features, in training). A derived model that replaces
  // forward calls this rather than features->forward, so the option is kept
  // (reference/derived_model.h).
  torch::Tensor extract_features(const torch::Tensor& x);
};
TORCH_MODULE(ImageClassifier);

// Explicit initialisation (the defaults differ between layer types and change between releases):
// conv kaiming-normal (fan_out, relu), BN weight 1 / bias 0, linear normal(0, 0.01) / bias 0.
void init_weights(torch::nn::Module& module);

}  // namespace tc::ref
