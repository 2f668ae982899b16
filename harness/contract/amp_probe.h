// Mixed precision, driven from outside: what the amp check (and resume_equality's AMP pass) asks
// of a recipe. tc::Run has no precision switch (a recipe's precision is its own business); a recipe
// that wants its mixed-precision training checked implements AmpProbe next to tc::Run, as
// ReferenceRun does, and the checks find it with dynamic_cast. Others get a skipped cell.
//
// The check asks for "mixed precision in dtype D"; how the recipe does it is what is checked (the
// reference: autocast + GradScaler for fp16, clip after unscale_; broken variants: .half(), no
// scaler, clip before unscale_).
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include <c10/core/ScalarType.h>

#include "harness/contract/run.h"

namespace torch::nn {
class Module;
}

namespace tc {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;  // false: scale() returns its input, step() just steps, the rest are no-ops

  GradScalerOptions& with_init_scale(double v) { init_scale = v; return *this; }
  GradScalerOptions& with_growth_factor(double v) { growth_factor = v; return *this; }
  GradScalerOptions& with_backoff_factor(double v) { backoff_factor = v; return *this; }
  GradScalerOptions& with_growth_interval(int64_t v) { growth_interval = v; return *this; }
  GradScalerOptions& with_enabled(bool v) { enabled = v; return *this; }
};

// PyTorch's state_dict(): {"scale", "growth_factor", "backoff_factor", "growth_interval",
// "_growth_tracker"}; a disabled scaler has none (std::nullopt).
struct GradScalerState {
  double scale = 0.0;
  double growth_factor = 0.0;
  double backoff_factor = 0.0;
  int64_t growth_interval = 0;
  int64_t growth_tracker = 0;
};


struct AmpOptions {
  // kFloat: full precision (mixed precision off, the default); kBFloat16 / kHalf: mixed precision
  // with that lower-precision dtype.
  c10::ScalarType dtype = c10::kFloat;
  // Options for the GradScaler a recipe uses with fp16 (the recipe decides whether it has one).
  GradScalerOptions scaler{};
  // The recipe multiplies its loss by this before backward, as a loss averaged over many tokens
  // or micro-batches is: the amp check uses it to make gradients as small as a large model's.
  double loss_weight = 1.0;
};

// A model the check brings to time the recipe's mixed-precision procedure on (the amp check's
// throughput workload: a transformer block, compute-bound where the recipe's own model is not),
// in fp32 on the device in use, with one fixed batch; the loss is cross-entropy.
struct AmpWorkload {
  std::shared_ptr<torch::nn::Module> model;
  std::function<at::Tensor(const at::Tensor&)> forward;  // input -> logits (B, classes)
  at::Tensor input;   // one batch, on the device
  at::Tensor target;  // (B) class indices, on the device
};

class AmpProbe {
 public:
  virtual ~AmpProbe() = default;
  // Before setup(): the precision the next setup() trains in.
  virtual void set_amp(const AmpOptions& options) = 0;
  // Called in each train step right after backward, before anything reads or changes the
  // gradients (unscale_, clip, step): params' grad() are the raw (possibly scaled) gradients; the
  // hook may read them or change them in place (the check injects an inf this way).
  virtual void set_after_backward(std::function<void(const NamedTensors& params)> hook) = 0;
  // The GradScaler's state after the last step's update; nullopt when the recipe trains without
  // an enabled scaler.
  virtual std::optional<GradScalerState> scaler_state() const = 0;
  // After setup(): one training step of the recipe's mixed-precision procedure, the one set_amp()
  // asked for (its autocast region, casts, scaler, clipping, optimizer step), applied to the
  // workload's model instead of its own, so that the procedure's speed can be measured on a
  // compute-bound model. Returns the step; calling it trains the workload one step and returns
  // the loss, read (so the device has finished). The instance is given over to the workload: the
  // check calls this on a fresh instance made for it and never trains that instance's own model
  // afterwards, so an implementation keeps the workload's optimizer and scaler in its own members
  // (nothing swapped, nothing lent). An empty function: the recipe does not offer it
  // (the throughput promises are then recorded as not measurable).
  virtual std::function<double()> amp_step_on(const AmpWorkload& workload) {
    (void)workload;
    return {};
  }
  // The sizes amp_step_on()'s step splits a workload batch of `batch` rows into (gradient
  // accumulation: one forward and backward per micro-batch, one optimizer step), in order; {batch}
  // (the default) when it does not split. The check times the reference's procedure, and this
  // machine's matmuls, on the same split, so that the speed it compares is the mixed-precision
  // procedure's and not the accumulation's (smaller matmuls gain less from a narrower dtype).
  virtual std::vector<int64_t> amp_micro_batches(int64_t batch) const { return {batch}; }
};

}  // namespace tc
