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
#include <optional>

#include <c10/core/ScalarType.h>

#include "reference/grad_scaler.h"
#include "reference/run.h"

namespace tc::ref {

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
};

}  // namespace tc::ref
