// The data_saturation check's extra per-batch work, as a value: a read latency (a sleep) and
// `blur_rounds` passes of a 5-point blur, (x + its four one-pixel shifts) / 5 over (B, C, H, W).
// LoaderProbeOptions::extra_augment holds one; a recipe whose batches are made outside this
// process (a Python recipe's DataLoader workers) reads its parameters with
// `options.extra_augment.target<tc::CostlyAugment>()` and does the same work there.
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

  at::Tensor operator()(const at::Tensor& images) const {
    if (read_latency.count() > 0) std::this_thread::sleep_for(read_latency);  // the read
    at::Tensor x = images;  // (B, C, H, W)
    for (int64_t r = 0; r < blur_rounds; ++r) {
      x = (x + x.roll(1, 2) + x.roll(-1, 2) + x.roll(1, 3) + x.roll(-1, 3)) * 0.2;  // (B, C, H, W)
    }
    return x;
  }
};

}  // namespace tc
