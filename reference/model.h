// The reference model: a small CNN like the seeds' ImageClassifier.
#pragma once

#include <functional>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/pimpl.h>

#include "harness/contract/run.h"

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

// How LibTorch initialises `model` when nothing else does, as declared_init() describes it, for any
// model built of these modules: Linear and Conv1d/2d/3d (weight and bias uniform in +-1/sqrt(fan_in),
// fan_in = in_channels / groups x the kernel's size: kaiming_uniform_ with a = sqrt(5)), BatchNorm,
// InstanceNorm, LayerNorm and GroupNorm (weight 1, bias 0), Embedding (normal, mean 0, std 1). A
// recipe that keeps LibTorch's defaults returns this from declared_init(); one that initialises
// explicitly declares its own. Throws tc::ProbeNotProvided naming the first module with parameters
// of another type (its default is not described here).
std::vector<InitSpec> libtorch_default_init(torch::nn::Module& model);

}  // namespace tc::ref
