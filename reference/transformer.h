// A small transformer block classifier: matmul-heavy where the reference CNN is not, so that
// mixed precision's throughput means something (the amp benchmarks train both).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

namespace tc::ref {

struct TransformerOptions {
  int64_t dim = 256;
  int64_t heads = 4;
  int64_t ff = 1024;
  int64_t seq = 64;
  int64_t classes = 4;
};

struct TransformerBlockImpl : torch::nn::Module {
  explicit TransformerBlockImpl(TransformerOptions o = {});
  // (B, T, D) -> (B, classes): pre-norm self-attention and MLP, each with a residual; mean-pooled.
  torch::Tensor forward(torch::Tensor x);

  TransformerOptions options;
  torch::nn::Linear embed{nullptr}, qkv{nullptr}, proj{nullptr}, ff1{nullptr}, ff2{nullptr}, head{nullptr};
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
};
TORCH_MODULE(TransformerBlock);

}  // namespace tc::ref
