// The checks' teeth, tested through the real registry: every broken variant is caught by every
// check it targets, the reference passes them all, and a variant made harmless is reported as
// `missed` (a check that cannot fail would be visible).
#include <set>

#include <gtest/gtest.h>

#include "harness/devices.h"
#include "harness/contract/registry.h"
#include "harness/runner.h"
#include "reference/reference_run.h"

namespace tc {
namespace {

// Declares that reproducibility must catch it, but breaks nothing.
class HarmlessVariant : public ref::ReferenceRun {};

// The promises a cell's check judged (metrics.promises, written by the check-authoring kit):
// present, each an object with an id the check registered and a status; the ids of those broken.
std::set<std::string> broken_promises(const Cell& c) {
  std::set<std::string> broken;
  const std::string where = c.check + " / " + c.recipe;
  const CheckInfo* check = Registry::global().find_check(c.check);
  if (check == nullptr) {
    ADD_FAILURE() << where << ": no such check";
    return broken;
  }
  std::set<std::string> registered;
  for (const PromiseInfo& p : check->promises) registered.insert(p.id);
  if (!c.metrics.is_object() || !c.metrics.contains("promises") || !c.metrics["promises"].is_array()) {
    ADD_FAILURE() << where << ": no metrics.promises list\n" << c.evidence;
    return broken;
  }
  EXPECT_FALSE(c.metrics["promises"].empty()) << where << ": metrics.promises is empty";
  for (const nlohmann::json& p : c.metrics["promises"]) {
    const std::string id = p.value("id", ""), status = p.value("status", "");
    EXPECT_TRUE(registered.count(id)) << where << ": promise '" << id << "' is not one the check registered";
    EXPECT_TRUE(status == "held" || status == "broken" || status == "recorded") << where << ": " << p.dump();
    EXPECT_FALSE(p.value("evidence", "").empty()) << where << ": " << p.dump();
    if (status == "broken") broken.insert(id);
  }
  return broken;
}

TEST(Teeth, EveryVariantTargetsAKnownCheck) {
  EXPECT_TRUE(Registry::global().validate().empty());
  int variants = 0;
  for (const RecipeInfo& r : Registry::global().recipes()) variants += r.is_variant();
  EXPECT_GE(variants, 11);
}

TEST(Teeth, AHarmlessVariantIsReportedMissedAndFailsTheRun) {
  Registry reg;
  for (const CheckInfo& c : Registry::global().checks()) reg.add_check(c);
  reg.add_recipe({"harmless", "breaks nothing", {"reproducibility", "eval_mode", "amp"},
                  [] { return std::unique_ptr<::tc::Run>(new HarmlessVariant()); }, __FILE__, __LINE__});
  RunPlan plan;
  plan.devices = {{"cpu", true, ""}};
  plan.checks = {"reproducibility", "eval_mode", "resume_equality", "amp"};
  plan.seed = 3;
  auto cells = run_cells(reg, plan);
  ASSERT_EQ(cells.size(), 4u);
  EXPECT_EQ(cells[0].verdict, Verdict::kMissed) << cells[0].evidence;
  EXPECT_EQ(cells[1].verdict, Verdict::kMissed) << cells[1].evidence;
  EXPECT_EQ(cells[2].expected, Expected::kAny);
  EXPECT_EQ(cells[3].check, "amp");
  EXPECT_EQ(cells[3].verdict, Verdict::kMissed) << cells[3].evidence;
  EXPECT_EQ(exit_code_for(cells), 1);
}

TEST(Teeth, ReferencePassesEveryCheckAndEachVariantIsCaughtWhereTargeted) {
  RunPlan plan;
  plan.devices = {{"cpu", true, ""}};
  plan.seed = 77;  // another seed than the CLI's default
  plan.cuda_present = cuda_available();
  plan.executable = "/proc/self/exe";  // a check's fresh process: this binary, also a command line
  // A check that runs alone (it measures time) or as several processes (the runner launches
  // torchrun on the torchconform binary) has its cells as conformance ctests instead.
  for (const CheckInfo& c : Registry::global().checks()) {
    if (!c.runs_alone && !c.multi_process()) plan.checks.push_back(c.name);
  }
  auto cells = run_cells(Registry::global(), plan);
  ASSERT_FALSE(cells.empty());
  for (const Cell& c : cells) {
    if (c.verdict == Verdict::kSkipped) {
      // Only where the practice cannot be checked from C++ or needs a device this machine lacks,
      // or where another check's variant breaks a practice this check relies on (the precondition
      // named; never a cell that must catch its recipe).
      const CheckInfo* check = Registry::global().find_check(c.check);
      const RecipeInfo* recipe = Registry::global().find_recipe(c.recipe);
      const bool precondition = c.expected == Expected::kAny && c.evidence.rfind("precondition not met", 0) == 0;
      EXPECT_TRUE(!check->covers_variants || (recipe->needs == "cuda" && !plan.cuda_present) || precondition)
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
    // A judged cell names its promises: none broken where it passes as expected, at least one
    // where a variant is caught.
    if (c.expected == Expected::kAny) continue;
    const std::set<std::string> broken = broken_promises(c);
    if (c.expected == Expected::kPass) {
      EXPECT_TRUE(broken.empty()) << c.check << " / " << c.recipe << ": " << *broken.begin();
    } else if (c.outcome == Outcome::kFail) {
      EXPECT_FALSE(broken.empty()) << c.check << " / " << c.recipe << ": " << c.evidence;
    }
  }
}

// Each mixed-precision variant is caught by the promise it breaks, not by another one by chance;
// no_scaler_state only by resume_equality's fp16 pass; autocast_wrong_device and inputs_cast_only
// (nothing cast: numerically fp32) only by engagement.
TEST(Teeth, EachMixedPrecisionVariantIsCaughtByThePromiseItBreaks) {
  RunPlan plan;
  plan.devices = {{"cpu", true, ""}};
  plan.checks = {"amp", "resume_equality"};
  plan.recipes = {"reference",       "manual_half",           "fp16_without_scaler", "clip_before_unscale",
                  "no_scaler_state", "autocast_wrong_device", "inputs_cast_only"};
  plan.seed = 5;
  auto cells = run_cells(Registry::global(), plan);
  auto find = [&](const std::string& check, const std::string& recipe) -> const Cell& {
    for (const Cell& c : cells) {
      if (c.check == check && c.recipe == recipe) return c;
    }
    throw std::runtime_error("no cell " + check + " / " + recipe);
  };
  auto failed = [](const Cell& c, const std::string& promise) {
    return c.evidence.find("- " + promise) != std::string::npos;
  };
  const Cell& ref = find("amp", "reference");
  EXPECT_EQ(ref.outcome, Outcome::kPass) << ref.evidence;
  for (const char* held : {"bf16 parity", "fp16 parity", "underflow", "scaler accounting", "clipping", "throughput",
                           "engagement (bf16", "engagement (fp16", "bf16 AMP procedure speed"}) {
    EXPECT_NE(ref.evidence.find(held), std::string::npos) << held << "\n" << ref.evidence;
  }
  EXPECT_TRUE(broken_promises(ref).empty()) << ref.evidence;
  const Cell& half = find("amp", "manual_half");
  EXPECT_TRUE(failed(half, "underflow") && failed(half, "scaler accounting") && failed(half, "bf16 parity"))
      << half.evidence;
  const Cell& noscaler = find("amp", "fp16_without_scaler");
  EXPECT_TRUE(failed(noscaler, "underflow") && failed(noscaler, "scaler accounting")) << noscaler.evidence;
  EXPECT_FALSE(failed(noscaler, "clipping")) << noscaler.evidence;
  const Cell& clip = find("amp", "clip_before_unscale");
  EXPECT_TRUE(failed(clip, "clipping")) << clip.evidence;
  EXPECT_FALSE(failed(clip, "underflow") || failed(clip, "scaler accounting")) << clip.evidence;
  for (const char* recipe : {"autocast_wrong_device", "inputs_cast_only"}) {
    const Cell& c = find("amp", recipe);
    EXPECT_EQ(c.verdict, Verdict::kOk) << recipe << "\n" << c.evidence;
    EXPECT_EQ(broken_promises(c), std::set<std::string>{"engagement"}) << recipe << "\n" << c.evidence;
    // The evidence names the ops that ran in fp32 (the CNN's convolution and linear layer).
    EXPECT_NE(c.evidence.find("not cast: "), std::string::npos) << c.evidence;
    EXPECT_NE(c.evidence.find("aten::conv2d"), std::string::npos) << c.evidence;
    EXPECT_TRUE(c.evidence.find("aten::linear") != std::string::npos || c.evidence.find("aten::addmm") != std::string::npos)
        << c.evidence;
    EXPECT_NE(c.evidence.find("in fp32)"), std::string::npos) << c.evidence;
  }
  const Cell& resume = find("resume_equality", "no_scaler_state");
  EXPECT_EQ(resume.verdict, Verdict::kOk) << resume.evidence;
  EXPECT_EQ(resume.outcome, Outcome::kFail);
  // The fp16 pass diverged (the broken promise, first); the fp32 pass held.
  EXPECT_EQ(broken_promises(resume), std::set<std::string>{"resume_bitwise_amp"}) << resume.evidence;
  EXPECT_EQ(resume.evidence.rfind("- with fp16 autocast + GradScaler:", 0), 0u) << resume.evidence;
  const size_t fp32_pass = resume.evidence.find("\n  held: ");
  ASSERT_NE(fp32_pass, std::string::npos) << resume.evidence;
  EXPECT_NE(resume.evidence.find("bitwise equal", fp32_pass), std::string::npos) << resume.evidence;
  EXPECT_EQ(find("resume_equality", "reference").outcome, Outcome::kPass);
}

}  // namespace
}  // namespace tc
