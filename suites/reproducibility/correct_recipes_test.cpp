// reproducibility on recipes written otherwise than the reference: correct ones that seed by
// another deterministic path, or read std::random_device for something training never sees, pass;
// a per-process salt in the augmentation seed is caught, by the run in another process and by
// nothing else (two runs in one process agree).
#include <random>

#include <gtest/gtest.h>

#include "reference/reference_run.h"
#include "reference/seed.h"
#include "suites/tests/test_recipes.h"

namespace tc {
namespace {

// Each batch's augmentation seed drawn from a std::mt19937_64 seeded through std::seed_seq with
// (epoch seed, batch), not through the reference's splitmix-style mix: other numbers, as
// deterministic.
class SeedSeqAugmentation : public ref::ReferenceRun {
 protected:
  uint64_t augmentation_seed(uint64_t epoch_seed, int64_t batch) const override {
    std::seed_seq seq{static_cast<uint32_t>(epoch_seed), static_cast<uint32_t>(epoch_seed >> 32),
                      static_cast<uint32_t>(batch)};
    std::mt19937_64 rng(seq);
    return rng();
  }
};

// A run id read once per process from std::random_device (for its log file names), never reaching
// training: per-process, and harmless.
class RandomRunId : public ref::ReferenceRun {
 protected:
  void seed_everything() override {
    static const uint64_t run_id = std::random_device{}();
    log_name_ = "run-" + std::to_string(run_id) + ".log";
    ReferenceRun::seed_everything();
  }

 private:
  std::string log_name_;
};

// Seeds everything (the loader's generator too) with 42, not the seed it was given.
class HardCodedSeed : public ref::ReferenceRun {
 protected:
  void seed_everything() override {
    seed_record_ = ref::seed_everything(42, options_.deterministic, {loader_generator_});
  }
};

// A salt that this test process sets and a fresh process (the binary started again) does not: state
// set by earlier work in the process, reaching the augmentation seed.
uint64_t g_process_state_salt = 0;

class ProcessStateSalted : public ref::ReferenceRun {
 protected:
  uint64_t augmentation_seed(uint64_t epoch_seed, int64_t batch) const override {
    return ref::ReferenceRun::augmentation_seed(epoch_seed ^ g_process_state_salt, batch);
  }
};

using testing_recipes::promise_status;
using testing_recipes::run_one;

TEST(ReproducibilityRecipes, TheReferenceIsBitwiseEqualInAnotherProcess) {
  const Cell c = run_one("reproducibility", "reference");
  EXPECT_EQ(c.outcome, Outcome::kPass) << c.evidence;
  EXPECT_EQ(promise_status(c, "other_process_bitwise"), "held") << c.evidence;
  std::cout << c.evidence << "\n";
}

TEST(ReproducibilityRecipes, SeedingThroughSeedSeqPasses) {
  const Cell c = run_one("reproducibility", "seed_seq_augmentation");
  EXPECT_EQ(c.outcome, Outcome::kPass) << c.evidence;
  EXPECT_EQ(promise_status(c, "other_process_bitwise"), "held") << c.evidence;
}

TEST(ReproducibilityRecipes, ARandomRunIdThatTrainingNeverSeesPasses) {
  const Cell c = run_one("reproducibility", "random_run_id");
  EXPECT_EQ(c.outcome, Outcome::kPass) << c.evidence;
  EXPECT_EQ(promise_status(c, "other_process_bitwise"), "held") << c.evidence;
}

// other_seed_differs, which no variant breaks: a recipe that seeds everything with a constant,
// whatever seed it is given, gives the same run for two seeds (the seeds' "hard-coded seed").
TEST(ReproducibilityRecipes, AHardCodedSeedIsCaughtByAnotherSeedGivingTheSameRun) {
  const Cell c = run_one("reproducibility", "hard_coded_seed");
  EXPECT_EQ(c.outcome, Outcome::kFail) << c.evidence;
  EXPECT_EQ(promise_status(c, "other_seed_differs"), "broken") << c.evidence;
  EXPECT_EQ(promise_status(c, "same_seed_bitwise"), "held") << c.evidence;
  EXPECT_EQ(promise_status(c, "other_process_bitwise"), "held") << c.evidence;
  std::cout << c.evidence << "\n";
}

// What differs between processes is named from a second fresh run: where both fresh processes agree
// and this one differs, the cause is state this process holds, not a value fixed once per process;
// where each process differs (the variant process_salted_augmentation), a value fixed per process.
TEST(ReproducibilityRecipes, ASecondFreshProcessSaysWhetherEachProcessOrOnlyThisOneDiffers) {
  g_process_state_salt = 0x5eed;
  const Cell held = run_one("reproducibility", "process_state_salted");
  g_process_state_salt = 0;
  EXPECT_EQ(held.outcome, Outcome::kFail) << held.evidence;
  EXPECT_EQ(promise_status(held, "same_seed_bitwise"), "held") << held.evidence;
  EXPECT_EQ(promise_status(held, "other_process_bitwise"), "broken") << held.evidence;
  EXPECT_NE(held.evidence.find("fresh processes agree with each other and this one differs from both"),
            std::string::npos) << held.evidence;
  EXPECT_EQ(held.metrics.value("second_fresh_process", ""), "the two fresh processes agree, this one differs");

  const Cell salted = run_one("reproducibility", "process_salted_augmentation");
  EXPECT_EQ(promise_status(salted, "other_process_bitwise"), "broken") << salted.evidence;
  EXPECT_NE(salted.evidence.find("each process trains differently while two runs in this one agree"),
            std::string::npos) << salted.evidence;
  EXPECT_EQ(salted.metrics.value("second_fresh_process", ""), "each process differs");
}

}  // namespace
}  // namespace tc

TC_TEST_RECIPE(tc::ProcessStateSalted, "process_state_salted",
               "the augmentation seed salted with a value this process holds and a fresh one does not");
TC_TEST_RECIPE(tc::HardCodedSeed, "hard_coded_seed", "seeds everything with 42, whatever seed it is given");
TC_TEST_RECIPE(tc::SeedSeqAugmentation, "seed_seq_augmentation",
               "augmentation seeds through std::seed_seq(epoch seed, batch)");
TC_TEST_RECIPE(tc::RandomRunId, "random_run_id", "a run id read from std::random_device, used only in a log name");
