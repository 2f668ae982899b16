// The reference's tools for measuring a data pipeline (the probe interface itself is the
// contract's: harness/contract/loader_probe.h): a timed step loop and a costly augmentation.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "harness/contract/loader_probe.h"
#include "reference/data.h"

namespace tc::ref {

// Drives a step loop: `next` blocks until the next batch is there and returns its sample count
// (0: no more batches), `step` consumes it. The time spent in `next` is the data wait.
DataWaitStats time_data_wait(const std::function<int64_t()>& next, const std::function<void()>& step,
                             int64_t warmup_steps, int64_t steps);

// A costly, deterministic augmentation for measuring loaders: `rounds` passes of a 5-point blur
// (x + its four one-pixel shifts) / 5 over (B, C, H, W). Elementwise work on small tensors, so it
// stays on the calling thread (under LibTorch's intra-op grain size) and its cost scales with
// `rounds`: a worker making it uses one core.
at::Tensor costly_blur(const at::Tensor& images, int64_t rounds);

}  // namespace tc::ref
