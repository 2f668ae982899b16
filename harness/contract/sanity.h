// Sanity before judgement: whether a recipe's training does anything a check can judge. A few steps
// of a fresh run: an epoch has steps, each loss is finite, the parameters stay finite, and the loss
// is not bitwise the same at every step. A check that compares two runs bitwise would otherwise
// call NaN "equal" to NaN, and zero steps "equal" to zero steps.
//
// Two users: the `sanity` check (suites/sanity/), whose cell fails naming the problem, and the runner,
// which skips every other cell of that recipe (->SanityPrecondition(), the default) with the problem
// as the precondition that failed. Needs LibTorch (tensors are inspected).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/contract/registry.h"
#include "harness/contract/run.h"

namespace tc {

struct SanityFinding {
  std::string promise;   // has_steps, finite_loss, finite_parameters, loss_moves
  bool held = true;
  bool judged = true;    // false: recorded, not judged (e.g. one step: nothing to compare)
  std::string evidence;
};

// The steps sanity runs: one epoch, at most this many.
constexpr int64_t kSanitySteps = 6;

// Sets up a fresh run from `make` with `options` and trains up to kSanitySteps steps. Exceptions of
// the recipe propagate (the caller decides what they mean).
std::vector<SanityFinding> training_sanity(const RunFactory& make, const RunOptions& options);

// The first finding that broke, in words ("" when none did).
std::string first_broken(const std::vector<SanityFinding>& findings);

}  // namespace tc
