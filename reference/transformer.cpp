#include "reference/transformer.h"

#include <torch/torch.h>

namespace tc::ref {

namespace nn = torch::nn;

TransformerBlockImpl::TransformerBlockImpl(TransformerOptions o) : options(o) {
  embed = register_module("embed", nn::Linear(o.dim, o.dim));
  ln1 = register_module("ln1", nn::LayerNorm(nn::LayerNormOptions({o.dim})));
  qkv = register_module("qkv", nn::Linear(o.dim, 3 * o.dim));
  proj = register_module("proj", nn::Linear(o.dim, o.dim));
  ln2 = register_module("ln2", nn::LayerNorm(nn::LayerNormOptions({o.dim})));
  ff1 = register_module("ff1", nn::Linear(o.dim, o.ff));
  ff2 = register_module("ff2", nn::Linear(o.ff, o.dim));
  head = register_module("head", nn::Linear(o.dim, o.classes));
}

torch::Tensor TransformerBlockImpl::forward(torch::Tensor x) {
  const int64_t b = x.size(0), t = x.size(1), d = options.dim, h = options.heads;
  x = embed->forward(x);                                       // (B, T, D)
  auto parts = qkv->forward(ln1->forward(x)).chunk(3, -1);     // 3 x (B, T, D)
  auto heads = [&](const torch::Tensor& u) { return u.view({b, t, h, d / h}).transpose(1, 2); };
  torch::Tensor a = at::scaled_dot_product_attention(heads(parts[0]), heads(parts[1]),
                                                     heads(parts[2]));  // (B, H, T, D/H)
  a = a.transpose(1, 2).reshape({b, t, d});                     // (B, T, D)
  x = x + proj->forward(a);                                     // (B, T, D)
  x = x + ff2->forward(torch::gelu(ff1->forward(ln2->forward(x))));  // (B, T, D)
  return head->forward(x.mean(1));                              // (B, classes)
}

}  // namespace tc::ref
