// step_hygiene's batch_gradient: which gradient the step used, against the gradient of the batch's
// loss recomputed independently (suites/step_hygiene/check.cpp judges the rest of the step).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/contract/registry.h"
#include "harness/contract/run.h"
#include "suites/support/generators.h"
#include "suites/support/kit.h"

namespace tc::step_hygiene {

inline constexpr const char* kBatchGradient = "batch_gradient";

// The replay model takes the hooks' gradient as given: a step whose backward passes carry twice the
// batch's gradient (the loss backpropagated twice, micro-batch losses not divided) replays exactly.
// So the sum of the step's backward passes is compared with an independent computation of the
// gradient of the batch's loss: a fresh run loaded from the step's checkpoint, the generators as the
// step began, the step's batch (Run::last_batch) split into as many contiguous micro-batches as the
// step had backward passes (one: the whole batch), each micro-batch's loss (Run::forward_train,
// Run::training_loss) weighed by its share, their gradients summed. The splits a recipe makes are
// tried in turn (candidate_splits); the first whose micro-batch gradients each point their backward
// pass's way to 1e-6 split where the recipe did and drew the step's own dropout masks.
//
// Even then the recipe may weigh its micro-batches otherwise (the mistake looked for), and where no
// split reproduces the masks the recomputation draws others (BatchNorm's statistics are per
// micro-batch, too), so the two are compared by the step's scale along the recomputed gradient, rho = <g_step, g_ref> / |g_ref|^2, not element by element.
// Where no split reproduces the masks (the recipe drew random numbers before its forward), g_ref is
// the mean of 8 recomputations with other draws and |g_ref|^2 is corrected for their spread, so that
// rho estimates the step's scale against the batch gradient's expectation over the draws. The mistakes this
// looks for scale the gradient by a whole factor (2 when backpropagated twice, k for k undivided
// micro-batches, 1/k when divided twice), so rho is judged by the nearer of 1 and such a factor on
// a log scale: the boundary is sqrt(2) (and 1/sqrt(2)). The judgement stands only when the
// recomputation's own spread is well inside it: the same recomputation from other generator states
// (other masks) must give |ln rho_noise| < ln(sqrt 2) / 2, and the step's gradient must point the
// recomputed way (cosine > 0.5); otherwise the promise is recorded as not judged, naming which.
struct BatchScale {
  double rho = 1.0, rho_noise = 1.0, cosine = 1.0;
  int64_t passes = 0;
  bool same_draws = false;  // the recomputation points the step's way to 1e-6: it drew the same masks
  int mean_of_draws = 1;    // without the same draws: how many recomputations the reference is the mean of
  std::vector<int64_t> split;  // the micro-batch sizes of the recomputation judged
  std::string not_judged;   // why the scale is not judged (empty: judged)
};

// The step's scale against the batch's gradient: `fresh` the sum of its backward passes per
// parameter (undefined: none), `passes` each pass apart, `gen` the generators as the step began,
// `before` the checkpoint it began from; `run` the recipe's run after the step (its last_batch()).
BatchScale measure_batch_scale(const CheckContext& ctx, const RunOptions& opts, const std::string& before,
                               const std::vector<at::Tensor>& fresh,
                               const std::vector<std::vector<at::Tensor>>& passes, const GeneratorStates& gen,
                               Run& run);

// batch_gradient held, broken (the cause named where the passes show it) or recorded not judged.
void judge_batch_scale(const BatchScale& b, const std::vector<std::vector<at::Tensor>>& passes, Findings& f);

// The contiguous splits of `batch` into `k` micro-batches a recipe may have made, the common ones
// first (see batch_gradient.cpp).
std::vector<std::vector<int64_t>> candidate_splits(int64_t batch, int64_t k);

}  // namespace tc::step_hygiene
