// Broken variants the reproducibility check must catch. Each is the reference with one practice
// of "Seed everything, and say so" broken.
#include <random>

#include "harness/contract/registry.h"
#include "reference/reference_run.h"

namespace tc::variants {

// Fail: `model = MyModel()` with no seeding at all.
class NoSeed : public ref::ReferenceRun {
 protected:
  void seed_everything() override {}
};

// Augmentation in the workers draws from a source nobody seeded (each worker's own engine,
// seeded from std::random_device), like numpy's global RNG in DataLoader workers without
// worker_init_fn.
class UnseededWorkers : public ref::ReferenceRun {
 protected:
  uint64_t augmentation_seed(uint64_t /*epoch_seed*/, int64_t /*batch*/) const override {
    thread_local std::mt19937_64 worker_rng{std::random_device{}()};
    return worker_rng();
  }
};

// The augmentation seed is salted with a value read once per process from std::random_device into
// a static (a "run id" mixed into every worker's seed): two runs in one process share it and agree
// bitwise; a rerun of the same seed in another process augments differently.
class ProcessSaltedAugmentation : public ref::ReferenceRun {
 protected:
  uint64_t augmentation_seed(uint64_t epoch_seed, int64_t batch) const override {
    static const uint64_t process_salt = std::random_device{}();
    return ref::ReferenceRun::augmentation_seed(epoch_seed ^ process_salt, batch);
  }
};

// torch's generators are seeded, but the loader is not handed a seeded generator: shuffling and
// the workers' augmentation seeds stay random whatever the global seed.
class SeedWithoutLoaderGenerator : public ref::ReferenceRun {
 protected:
  void seed_everything() override {
    seed_record_ = ref::seed_everything(options_.seed, options_.deterministic, /*owned=*/{});
  }
};

}  // namespace tc::variants

TC_RECIPE(tc::variants::NoSeed, "no_seed",
          "seed_everything is never called")
    ->MustBeCaughtBy({"reproducibility"})
    ->Breaks("reproducibility", {"same_seed_bitwise", "other_process_bitwise"});
TC_RECIPE(tc::variants::UnseededWorkers, "unseeded_workers",
          "augmentation in the loader's workers draws from an unseeded source")
    ->MustBeCaughtBy({"reproducibility", "data_saturation"})
    ->Breaks("reproducibility", {"same_seed_bitwise", "other_process_bitwise"})
    ->Breaks("data_saturation", {"worker_augmentations"});
TC_RECIPE(tc::variants::ProcessSaltedAugmentation, "process_salted_augmentation",
          "the augmentation seed is salted with a value read once per process from std::random_device")
    ->MustBeCaughtBy({"reproducibility"})
    ->Breaks("reproducibility", {"other_process_bitwise"});
TC_RECIPE(tc::variants::SeedWithoutLoaderGenerator, "seed_without_loader_generator",
          "torch is seeded but the loader's own generator is not")
    ->MustBeCaughtBy({"reproducibility"})
    ->Breaks("reproducibility", {"same_seed_bitwise", "other_process_bitwise"});
