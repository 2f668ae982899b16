// Broken variants the resume_equality check must catch: each checkpoints all but one part of
// the training state ("Checkpoint the whole training state").
#include <algorithm>

#include "harness/contract/registry.h"
#include "reference/reference_run.h"

namespace tc::variants {

// Drops one named part from the reference's full-state checkpoint.
template <const char* Part>
class Without : public ref::ReferenceRun {
 protected:
  std::vector<ref::CheckpointPart> checkpoint_parts() override {
    auto parts = ReferenceRun::checkpoint_parts();
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
class WeightsOnlyCheckpoint : public ref::ReferenceRun {
 protected:
  std::vector<ref::CheckpointPart> checkpoint_parts() override {
    auto parts = ReferenceRun::checkpoint_parts();
    parts.resize(1);  // {"model"}
    return parts;
  }
};

}  // namespace tc::variants

TC_RECIPE(tc::variants::WeightsOnlyCheckpoint, "weights_only_checkpoint",
          "the checkpoint holds the model weights only")
    ->MustBeCaughtBy({"resume_equality"})
    ->Breaks("resume_equality", {"resume_bitwise"});
TC_RECIPE(tc::variants::Without<tc::variants::kOptimizer>, "no_optimizer_state",
          "the checkpoint leaves out the optimizer state (momentum, learning rate)")
    ->MustBeCaughtBy({"resume_equality"})
    ->Breaks("resume_equality", {"resume_bitwise"});
TC_RECIPE(tc::variants::Without<tc::variants::kScheduler>, "no_scheduler_state",
          "the checkpoint leaves out the learning-rate scheduler's position")
    ->MustBeCaughtBy({"resume_equality"})
    ->Breaks("resume_equality", {"resume_bitwise"});
TC_RECIPE(tc::variants::Without<tc::variants::kRng>, "no_rng_state",
          "the checkpoint leaves out the RNG states (torch CPU/CUDA, the loader's)")
    ->MustBeCaughtBy({"resume_equality"})
    ->Breaks("resume_equality", {"resume_bitwise"});
TC_RECIPE(tc::variants::Without<tc::variants::kSampler>, "no_sampler_position",
          "the checkpoint leaves out the sampler's epoch order and position: the epoch "
                   "restarts on resume")
    ->MustBeCaughtBy({"resume_equality"})
    ->Breaks("resume_equality", {"resume_bitwise"});
TC_RECIPE(tc::variants::Without<tc::variants::kScaler>, "no_scaler_state",
          "the checkpoint leaves out the GradScaler's state (scale, growth tracker): with fp16 "
                   "mixed precision the resumed run starts over at the initial scale")
    ->MustBeCaughtBy({"resume_equality"})
    ->Breaks("resume_equality", {"resume_bitwise_amp"});
