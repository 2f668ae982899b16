// The mixed-precision train step as one function, for any model (the benchmarks use it; the
// reference recipe's ReferenceRun::forward_loss + optimisation_step do the same in its slots):
// autocast forward and loss, scaled backward, unscale_, clip, step (skipped on inf/NaN), update.
#pragma once

#include <functional>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "reference/grad_scaler.h"

namespace tc::ref {

struct AmpStepOptions {
  c10::Device device = c10::Device(c10::kCPU);
  c10::ScalarType dtype = c10::kFloat;  // kFloat: no autocast
  double clip_norm = 1.0;               // 0: no clipping
};

// Returns the loss (a 0-dim tensor; reading it synchronises, so the caller decides).
at::Tensor amp_train_step(const std::function<at::Tensor()>& forward_loss, torch::optim::Optimizer& optimizer,
                          GradScaler& scaler, const std::vector<at::Tensor>& params, const AmpStepOptions& options);

}  // namespace tc::ref
