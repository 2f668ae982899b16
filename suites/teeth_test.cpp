// The checks' teeth, tested through the real registry: every broken variant is caught by every
// check it targets, the reference passes them all, and a variant made harmless is reported as
// `missed` (a check that cannot fail would be visible).
#include <gtest/gtest.h>

#include "harness/devices.h"
#include "harness/multi_process.h"
#include "harness/registry.h"
#include "harness/runner.h"
#include "reference/reference_run.h"

namespace tc {
namespace {

// Declares that reproducibility must catch it, but breaks nothing.
class HarmlessVariant : public ref::ReferenceRun {};

TEST(Teeth, EveryVariantTargetsAKnownCheck) {
  EXPECT_TRUE(Registry::global().validate().empty());
  int variants = 0;
  for (const RecipeInfo& r : Registry::global().recipes()) variants += r.is_variant();
  EXPECT_GE(variants, 11);
}

TEST(Teeth, AHarmlessVariantIsReportedMissedAndFailsTheRun) {
  Registry reg;
  for (const CheckInfo& c : Registry::global().checks()) reg.add_check(c);
  reg.add_recipe({"harmless", "breaks nothing", {"reproducibility", "eval_mode"},
                  [] { return std::unique_ptr<::tc::Run>(new HarmlessVariant()); }, __FILE__, __LINE__});
  RunPlan plan;
  plan.devices = {{"cpu", true, ""}};
  plan.checks = {"reproducibility", "eval_mode", "resume_equality"};
  plan.seed = 3;
  auto cells = run_cells(reg, plan);
  ASSERT_EQ(cells.size(), 3u);
  EXPECT_EQ(cells[0].verdict, Verdict::kMissed) << cells[0].evidence;
  EXPECT_EQ(cells[1].verdict, Verdict::kMissed) << cells[1].evidence;
  EXPECT_EQ(cells[2].expected, Expected::kAny);
  EXPECT_EQ(exit_code_for(cells), 1);
}

TEST(Teeth, ReferencePassesEveryCheckAndEachVariantIsCaughtWhereTargeted) {
  RunPlan plan;
  plan.devices = {{"cpu", true, ""}};
  plan.seed = 77;  // another seed than the CLI's default
  plan.cuda_present = cuda_available();
  // data_saturation times the loader against a simulated device: its judged cells run as
  // conformance ctests alone (RUN_SERIAL), not here beside other tests competing for the cores.
  for (const CheckInfo& c : Registry::global().checks()) {
    // distributed launches torchrun on the torchconform binary: its cells are conformance ctests
    // (label multi).
    if (c.name != "data_saturation" && !is_multi_process_check(c.name)) plan.checks.push_back(c.name);
  }
  auto cells = run_cells(Registry::global(), plan);
  ASSERT_FALSE(cells.empty());
  for (const Cell& c : cells) {
    if (c.verdict == Verdict::kSkipped) {
      // Only where the practice cannot be checked from C++ or needs a device this machine lacks.
      const CheckInfo* check = Registry::global().find_check(c.check);
      const RecipeInfo* recipe = Registry::global().find_recipe(c.recipe);
      EXPECT_TRUE(!check->covers_variants || (recipe->needs == "cuda" && !plan.cuda_present))
          << c.check << " / " << c.recipe << " skipped: " << c.evidence;
      EXPECT_FALSE(c.evidence.empty());
      continue;
    }
    EXPECT_EQ(c.verdict, Verdict::kOk) << c.check << " / " << c.recipe << ": " << c.evidence;
    if (c.recipe == "reference") EXPECT_EQ(c.outcome, Outcome::kPass) << c.check;
    if (c.expected == Expected::kFail) {
      EXPECT_EQ(c.outcome, Outcome::kFail) << c.check << " / " << c.recipe;
      // Caught by measurement, not by the recipe crashing.
      EXPECT_EQ(c.evidence.find("recipe threw"), std::string::npos) << c.evidence;
    }
  }
}

}  // namespace
}  // namespace tc
