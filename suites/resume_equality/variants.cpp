// The resume_equality variants (variants.h) registered on the reference.
#include "suites/resume_equality/variants.h"

#include "harness/contract/registry.h"

TC_RECIPE(tc::variants::WeightsOnlyCheckpoint<>, "weights_only_checkpoint",
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
