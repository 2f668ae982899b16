// Broken variants the resume_equality check must catch: each checkpoints all but one part of
// the training state ("Checkpoint the whole training state"). Templates over the recipe they
// break: registered on the reference (variants.cpp), built on other slots by the tests
// (suites/tests/slots_test.cpp).
#pragma once

#include <algorithm>
#include <vector>

#include "reference/reference_run.h"

namespace tc::variants {

// Drops one named part from the reference's full-state checkpoint.
template <const char* Part, class Base = ref::ReferenceRun>
class Without : public Base {
 protected:
  std::vector<ref::CheckpointPart> checkpoint_parts() override {
    auto parts = Base::checkpoint_parts();
    parts.erase(std::remove_if(parts.begin(), parts.end(),
                               [](const ref::CheckpointPart& p) { return p.name == Part; }),
                parts.end());
    return parts;
  }
};

inline constexpr char kOptimizer[] = "optimizer";
inline constexpr char kScheduler[] = "scheduler";
inline constexpr char kRng[] = "rng";
inline constexpr char kSampler[] = "sampler";
inline constexpr char kScaler[] = "scaler";

// Fail: `torch.save(model.state_dict(), path)`: only the weights.
template <class Base = ref::ReferenceRun>
class WeightsOnlyCheckpoint : public Base {
 protected:
  std::vector<ref::CheckpointPart> checkpoint_parts() override {
    auto parts = Base::checkpoint_parts();
    parts.resize(1);  // {"model"}
    return parts;
  }
};

}  // namespace tc::variants
