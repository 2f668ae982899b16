// Every branch of what a second fresh process says of a difference between processes, on
// fingerprints as the reproducibility check writes them.
#include "suites/reproducibility/divergence.h"

#include <gtest/gtest.h>

namespace tc::reproducibility {
namespace {

nlohmann::json run(uint64_t last_loss_bits, const std::string& weight_hash) {
  return {{"loss_bits", {4611686018427387904ull, last_loss_bits}},
          {"params", {{{"name", "fc.weight"}, {"hash", weight_hash}, {"sum", 1.5}}}},
          {"eval_loss_bits", 4607182418800017408ull},
          {"eval_accuracy", 0.5},
          {"eval_logits", "float[4x10]:00ff"}};
}

TEST(ReproducibilityDivergence, SameRunComparesEveryPartButTheSums) {
  const nlohmann::json a = run(1, "float[10x4]:aa");
  nlohmann::json b = a;
  b["params"][0]["sum"] = 2.5;  // a sum is said in the evidence, never compared: the hash is
  EXPECT_TRUE(same_run(a, b));
  EXPECT_FALSE(same_run(a, run(2, "float[10x4]:aa")));
  EXPECT_FALSE(same_run(a, run(1, "float[10x4]:ab")));
  b = a;
  b["eval_logits"] = "float[4x10]:0100";
  EXPECT_FALSE(same_run(a, b));
  b = a;
  b["params"].push_back({{"name", "fc.bias"}, {"hash", "float[10]:01"}, {"sum", 0.0}});
  EXPECT_FALSE(same_run(a, b));
}

TEST(ReproducibilityDivergence, TheSecondFreshRunSaysWhichRunWasTheOddOne) {
  const nlohmann::json here = run(1, "float[10x4]:aa"), first = run(2, "float[10x4]:ab");
  EXPECT_EQ(classify(here, first, here), Divergence::kSecondAgreesHere);
  EXPECT_EQ(classify(here, first, first), Divergence::kFreshAgree);
  EXPECT_EQ(classify(here, first, run(3, "float[10x4]:ac")), Divergence::kEachDiffers);
  EXPECT_NE(explain(Divergence::kSecondAgreesHere, true).find("not per process"), std::string::npos);
  EXPECT_NE(explain(Divergence::kFreshAgree, true).find("this one differs from both"), std::string::npos);
  EXPECT_NE(explain(Divergence::kEachDiffers, true).find("fixed once per process"), std::string::npos);
  // Where two runs in this process already differ, no per-process cause is named.
  EXPECT_EQ(explain(Divergence::kEachDiffers, false).find("once per process"), std::string::npos);
}

TEST(ReproducibilityDivergence, AnOddRunIsBlamedOnlyWhereTheDifferenceRepeats) {
  // gen-130037 (2026-12-05, load average about 5): one fresh run of four differed at step 1, a second
  // fresh process agreed with this one. Three more that agree: not laid to the recipe.
  const nlohmann::json here = run(1, "float[10x4]:aa"), odd = run(2, "float[10x4]:ab");
  int calls = 0;
  EXPECT_EQ(first_repeat(here, [&] { ++calls; return here; }), 0);
  EXPECT_EQ(calls, kRepeatRuns);
  EXPECT_NE(not_repeated(kRepeatRuns).find("not judged"), std::string::npos);
  // A recipe whose runs differ from run to run: the second more run differs, and the runs stop there.
  calls = 0;
  EXPECT_EQ(first_repeat(here, [&] { return ++calls == 2 ? odd : here; }), 2);
  EXPECT_EQ(calls, 2);
  EXPECT_NE(repeated(2, kRepeatRuns).find("fresh run 2 of 3"), std::string::npos);
}

}  // namespace
}  // namespace tc::reproducibility
