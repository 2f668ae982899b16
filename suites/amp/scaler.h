// amp's promises about the GradScaler and the gradients it hands on (fp16): no underflow, the
// scale's accounting of skipped and grown steps, clipping on unscaled gradients. Each one judged
// into a Findings, as suites/amp/check.cpp's header comment describes (promises 2 to 4).
#pragma once

#include "harness/contract/registry.h"
#include "suites/support/kit.h"

namespace tc::amp {

// The loss weight (a power of two) that puts the median fp32 gradient element at 2^-20.
double small_gradient_weight(const CheckContext& ctx);
// fp16_no_underflow: with the loss weighted by `w`, the gradient elements lost to fp16.
void underflow(const CheckContext& ctx, double w, Findings& out);
// scaler_accounting: an injected inf skips the step and backs the scale off; it grows again.
void accounting(const CheckContext& ctx, double w, Findings& out);
// clip_after_unscale: the clip threshold in effect is the one asked for.
void clipping(const CheckContext& ctx, double max_norm, Findings& out);

}  // namespace tc::amp
