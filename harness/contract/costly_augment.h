// The data_saturation check's extra per-batch work, as a value: a read latency (a sleep) and
// `blur_rounds` passes of a blur, (x + its one-step shifts along the blurred dimensions) / (1 + 2 dims),
// for a batch of any layout:
//   - images, a floating (B, C, H, W) batch of any channel count: blurred over H and W, returned
//     blurred (the work an image pipeline does);
//   - any other batch (tabular rows (B, F), token ids (B, T) of an integer type, sequences of
//     features (B, T, F), a (B,) column): a float copy blurred over every non-batch dimension, the
//     batch returned unchanged (the work costs in proportion to its size and changes no token id).
// LoaderProbeOptions::extra_augment holds one; a recipe whose batches are made outside this
// process (a Python recipe's DataLoader workers) reads its parameters with
// `options.extra_augment.target<tc::CostlyAugment>()` and does the same work there
// (python/torchconform/_loader.py, CostlyAugment).
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

#include <ATen/core/Tensor.h>
#include <ATen/TensorOperators.h>

namespace tc {

struct CostlyAugment {
  int64_t blur_rounds = 0;
  std::chrono::microseconds read_latency{0};

  at::Tensor operator()(const at::Tensor& batch) const {
    if (read_latency.count() > 0) std::this_thread::sleep_for(read_latency);  // the read
    const bool images = batch.dim() == 4 && batch.is_floating_point();
    at::Tensor x = images ? batch : batch.to(c10::kFloat);
    if (x.dim() < 2) x = x.reshape({x.numel(), 1});  // (B,) -> (B, 1): a column
    const int64_t first = images ? 2 : 1;
    for (int64_t r = 0; r < blur_rounds; ++r) {
      at::Tensor sum = x;
      for (int64_t d = first; d < x.dim(); ++d) sum = sum + x.roll(1, d) + x.roll(-1, d);
      x = sum * (1.0 / static_cast<double>(1 + 2 * (x.dim() - first)));
    }
    return images ? x : batch;
  }
};

}  // namespace tc
