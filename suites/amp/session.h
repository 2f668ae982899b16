// What amp's promises share: a fresh run of the recipe with mixed precision asked for, and the
// tools to read its gradients (suites/amp/check.cpp, suites/amp/scaler.cpp).
#pragma once

#include <memory>
#include <string>

#include <ATen/core/Tensor.h>

#include "harness/contract/amp_probe.h"
#include "harness/contract/registry.h"
#include "harness/contract/run.h"

namespace tc::amp {

// A fresh run of the cell's recipe and its AmpProbe.
struct Amp {
  std::unique_ptr<Run> run;
  AmpProbe* probe = nullptr;
};

// Set up with `options` (the recipe lacking tc::AmpProbe: the cell skips, naming it).
Amp fresh(const CheckContext& ctx, const AmpOptions& options);
AmpOptions amp_options(c10::ScalarType dtype, double loss_weight = 1.0);
// Unit roundoff of the lower-precision dtype (half the distance from 1 to the next number).
double unit_roundoff(c10::ScalarType t);
// Every parameter (or its gradient), flattened into one float64 CPU vector, in order.
at::Tensor flat(const NamedTensors& params, bool grads);
double l2(const at::Tensor& t);
// A recipe that overrides its step without calling AmpProbe's after-backward hook cannot be
// measured; that is the recipe's failure (outcome fail), not the harness's.
[[noreturn]] void hook_not_called();

// Captures the gradient of the next train_step through the AmpProbe hook, divided by the scale in
// effect (a power of two: exact). Removes its hook when destroyed.
class GradientTap {
 public:
  explicit GradientTap(AmpProbe& probe) : probe_(probe) {
    probe_.set_after_backward([this](const NamedTensors& ps) {
      if (armed_) grad_ = flat(ps, true) / scale_;
      armed_ = false;
    });
  }
  ~GradientTap() { probe_.set_after_backward({}); }
  void arm(double scale) {
    armed_ = true;
    scale_ = scale;
    grad_ = at::Tensor();
  }
  const at::Tensor& grad() const { return grad_; }

 private:
  AmpProbe& probe_;
  bool armed_ = false;
  double scale_ = 1.0;
  at::Tensor grad_;
};

}  // namespace tc::amp
