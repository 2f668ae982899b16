// GradScaler: PyTorch's torch.amp.GradScaler in C++ (LibTorch has autocast but no scaler).
//
// Same semantics and defaults as torch/amp/grad_scaler.py (2.x): the scale lives in a float32
// tensor on the device of the first scaled output (lazily made), the growth tracker in an int32
// tensor; unscale_ groups the optimizer's gradients by (device, dtype) and calls ATen's
// _amp_foreach_non_finite_check_and_unscale_ with inv_scale = float(1 / double(scale)); step skips
// optimizer.step() when any gradient held an inf/NaN; update calls _amp_update_scale_ (inf found:
// scale *= backoff, tracker = 0; else tracker += 1 and, at growth_interval, scale *= growth).
// unscale_ twice for one optimizer between updates, or after step, throws as PyTorch does.
//
//   tc::ref::GradScaler scaler;                       // init 2^16, growth 2, backoff 0.5, 2000
//   optimizer.zero_grad();
//   { tc::ref::AutocastGuard ac(c10::kCUDA, c10::kHalf); loss = loss_fn(model(x), y); }
//   scaler.scale(loss).backward();
//   scaler.unscale_(optimizer);                       // clip the true gradients, not scaled ones
//   torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
//   scaler.step(optimizer);                           // skipped on inf/NaN
//   scaler.update();
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "harness/contract/amp_probe.h"  // GradScalerOptions, GradScalerState

namespace torch::optim {
class Optimizer;
}
namespace torch::serialize {
class OutputArchive;
class InputArchive;
}  // namespace torch::serialize

namespace tc::ref {

class GradScaler {
 public:
  // Throws std::invalid_argument when enabled with growth_factor <= 1 or backoff_factor >= 1.
  explicit GradScaler(GradScalerOptions options = {});

  // outputs * scale (the scale made on outputs' device on first use); outputs when disabled.
  at::Tensor scale(const at::Tensor& outputs);
  // Divides the optimizer's gradients by the scale in place and records whether any was inf/NaN.
  // Throws std::logic_error if called twice for `optimizer` since the last update(), or after
  // step(); std::invalid_argument for fp16 gradients ("Attempting to unscale FP16 gradients.").
  void unscale_(torch::optim::Optimizer& optimizer);
  // unscale_ (unless already done this iteration), then optimizer.step() unless an inf/NaN was
  // found. Returns whether the optimizer stepped. Throws std::logic_error if called twice.
  bool step(torch::optim::Optimizer& optimizer);
  // New scale from every optimizer's found_inf of this iteration; starts the next iteration.
  void update();
  // Sets the scale by hand (PyTorch's update(new_scale)).
  void update(double new_scale);

  bool is_enabled() const { return options_.enabled; }
  // The current scale (synchronises with the device); 1.0 when disabled.
  double get_scale() const;
  int64_t growth_tracker() const;
  // The scale tensor (undefined before the first scale()).
  const at::Tensor& scale_tensor() const { return scale_; }
  const GradScalerOptions& options() const { return options_; }

  std::optional<GradScalerState> state_dict() const;
  // No-op when disabled (as PyTorch). Throws std::invalid_argument on an empty state.
  void load_state_dict(const std::optional<GradScalerState>& state);
  // The state_dict's keys as values of an archive (nothing when disabled), and back.
  void save(torch::serialize::OutputArchive& archive) const;
  // Throws std::runtime_error, as PyTorch does, when an enabled scaler is given an empty state.
  void load(torch::serialize::InputArchive& archive);

 private:
  enum class Stage { kReady, kUnscaled, kStepped };
  struct PerOptimizer {
    Stage stage = Stage::kReady;
    std::vector<std::pair<c10::Device, at::Tensor>> found_inf_per_device;  // float32 scalars
  };
  void check_initialised(const char* function) const;
  std::vector<std::pair<c10::Device, at::Tensor>> unscale_grads(torch::optim::Optimizer& optimizer,
                                                  const at::Tensor& inv_scale, const at::Tensor& found_inf,
                                                  bool allow_fp16);

  GradScalerOptions options_;
  int64_t init_growth_tracker_ = 0;
  at::Tensor scale_;           // float32 scalar
  at::Tensor growth_tracker_;  // int32 scalar
  std::map<const torch::optim::Optimizer*, PerOptimizer> per_optimizer_;
};

}  // namespace tc::ref
