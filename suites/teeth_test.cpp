// The checks' teeth, tested through the real registry: every broken variant is caught by every
// check it targets, the reference passes them all, and a variant made harmless is reported as
// `missed` (a check that cannot fail would be visible).
#include <algorithm>
#include <iostream>
#include <map>
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

// A targeted variant's broken promise, when measured (Findings' measured held/broken: "margin" =
// deviation / bar), must be beyond its bar by at least 10%, and a measured promise the reference
// holds must be inside it by as much (margin <= 1 / 1.1). Every figure judged in these cells is
// deterministic on the CPU for a seed (the same kernels in the same order, the same allocations),
// so 10% of the bar is far beyond run-to-run noise; and it is what the memory promise can show at
// most (a recipe that ignores activation_checkpointing keeps exactly the plain activations: ratio
// 1.0 against the bar 0.9, margin 1.11).
constexpr double kMinMargin = 1.1;

// Checks each measured promise of a judged cell against kMinMargin; prints every margin.
void expect_clear_margins(const Cell& c) {
  if (c.expected == Expected::kAny || !c.metrics.is_object() || !c.metrics.contains("promises")) return;
  for (const nlohmann::json& p : c.metrics["promises"]) {
    if (!p.contains("margin") || !p["margin"].is_number()) continue;
    const double margin = p["margin"].get<double>();
    const std::string status = p.value("status", "");
    std::cout << "[margin] " << c.check << " / " << c.recipe << " / " << p.value("id", "") << ": " << status
              << ", deviation " << p.value("deviation", 0.0) << " / bar " << p.value("bar", 0.0) << " = " << margin
              << "\n";
    if (c.expected == Expected::kFail && status == "broken") {
      EXPECT_GE(margin, kMinMargin) << c.check << " / " << c.recipe << " caught by a hair: " << p.dump();
    } else if (c.expected == Expected::kPass && status == "held") {
      EXPECT_LE(margin, 1.0 / kMinMargin) << c.check << " / " << c.recipe << " held by a hair: " << p.dump();
    }
  }
  // amp records its parity margins in metrics (its bar belongs to its parity promise).
  for (const char* d : {"parity_bf16", "parity_fp16"}) {
    if (!c.metrics.contains(d) || !c.metrics[d].contains("loss_margin")) continue;
    std::cout << "[margin] " << c.check << " / " << c.recipe << " / " << d << ": loss " << c.metrics[d]["loss_margin"]
              << ", update " << c.metrics[d]["update_margin"] << "\n";
  }
}

// The exact set of broken variants and the checks each must be caught by: one added, removed or
// retargeted without this list changing is a mistake caught here, not a count still passing.
TEST(Teeth, EveryVariantTargetsAKnownCheck) {
  EXPECT_TRUE(Registry::global().validate().empty());
  const std::map<std::string, std::vector<std::string>> want = {
      {"manual_half", {"amp"}},
      {"fp16_without_scaler", {"amp"}},
      {"clip_before_unscale", {"amp"}},
      {"inplace_on_saved", {"autograd_inplace"}},
      {"wrapper_prefixed_state", {"checkpoint_safety"}},
      {"non_atomic_save", {"checkpoint_safety"}},
      {"workers_0", {"data_saturation"}},
      {"pin_without_non_blocking", {"data_saturation"}},
      {"hardcoded_cuda", {"device_agnostic"}},
      {"mixed_devices", {"device_agnostic"}},
      {"no_set_epoch", {"distributed"}},
      {"all_ranks_write", {"distributed"}},
      {"no_barrier_after_save", {"distributed"}},
      {"no_grad_allreduce", {"distributed"}},
      {"no_eval", {"eval_mode"}},
      {"no_grad_guard_missing", {"eval_mode"}},
      {"no_train_after_eval", {"eval_mode"}},
      {"reentrant_drops_param_grads", {"grad_checkpointing"}},
      {"ignores_checkpointing", {"grad_checkpointing"}},
      {"default_init", {"init"}},
      {"layer_in_forward", {"registration"}},
      {"no_seed", {"reproducibility"}},
      {"unseeded_workers", {"reproducibility", "data_saturation"}},
      {"seed_without_loader_generator", {"reproducibility"}},
      {"weights_only_checkpoint", {"resume_equality"}},
      {"no_optimizer_state", {"resume_equality"}},
      {"no_scheduler_state", {"resume_equality"}},
      {"no_rng_state", {"resume_equality"}},
      {"no_sampler_position", {"resume_equality"}},
      {"no_scaler_state", {"resume_equality"}},
      {"view_flatten", {"shapes"}},
      {"no_zero_grad", {"step_hygiene"}},
      {"clip_after_step", {"step_hygiene"}},
      {"zero_grad_before_step", {"step_hygiene"}},
      {"silent_inplace_on_saved", {"autograd_inplace"}},
      {"process_salted_augmentation", {"reproducibility"}},
      {"detach_instead_of_no_grad", {"eval_mode"}},
      {"autocast_wrong_device", {"amp"}},
      {"inputs_cast_only", {"amp"}},
  };
  std::map<std::string, std::vector<std::string>> got;
  for (const RecipeInfo& r : Registry::global().recipes()) {
    if (r.is_variant()) got[r.name] = r.targets;
  }
  EXPECT_EQ(got.size(), 39u);
  EXPECT_EQ(got, want);
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
    expect_clear_margins(c);
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

// The checks the test above leaves out, through the same runner and its guard: data_saturation
// measures time (run alone: this test is RUN_SERIAL in CTest) and distributed runs under torchrun
// (the runner launches it on the torchconform binary). The reference passes; each variant is
// caught by a broken promise of the check it targets, with a clear margin where one is measured.
TEST(TeethAlone, TimedAndMultiProcessChecksCatchTheirVariantsByTheirPromises) {
  RunPlan plan;
  plan.devices = {{"cpu", true, ""}};
  plan.seed = 77;
  plan.cuda_present = cuda_available();
  plan.executable = TC_BINARY;
  plan.checks = {"data_saturation", "distributed"};
  plan.recipes = {"reference"};
  for (const RecipeInfo& r : Registry::global().recipes()) {
    for (const std::string& t : r.targets) {
      if ((t == "data_saturation" || t == "distributed") &&
          std::find(plan.recipes.begin(), plan.recipes.end(), r.name) == plan.recipes.end()) {
        plan.recipes.push_back(r.name);
      }
    }
  }
  auto cells = run_cells(Registry::global(), plan);
  int caught = 0;
  for (const Cell& c : cells) {
    if (c.expected == Expected::kAny) continue;
    const RecipeInfo* recipe = Registry::global().find_recipe(c.recipe);
    if (c.verdict == Verdict::kSkipped) {
      // Only a variant whose practice shows where a CUDA device exists (never for want of torchrun).
      EXPECT_TRUE(recipe->needs == "cuda" && !plan.cuda_present) << c.check << " / " << c.recipe << ": " << c.evidence;
      continue;
    }
    EXPECT_EQ(c.verdict, Verdict::kOk) << c.check << " / " << c.recipe << ": " << c.evidence;
    expect_clear_margins(c);
    const std::set<std::string> broken = broken_promises(c);
    if (c.expected == Expected::kPass) {
      EXPECT_EQ(c.outcome, Outcome::kPass) << c.check << ": " << c.evidence;
      EXPECT_TRUE(broken.empty()) << c.check << ": " << c.evidence;
    } else {
      EXPECT_EQ(c.outcome, Outcome::kFail) << c.check << " / " << c.recipe << ": " << c.evidence;
      EXPECT_FALSE(broken.empty()) << c.check << " / " << c.recipe << ": " << c.evidence;
      caught += c.verdict == Verdict::kOk && !broken.empty();
    }
    std::cout << "[teeth] " << c.check << " / " << c.recipe << ": " << to_string(c.verdict) << " ("
              << to_string(c.outcome) << ")\n";
  }
  // workers_0 and unseeded_workers (data_saturation), the four distributed ones; pin_without_non_blocking
  // needs a CUDA device.
  EXPECT_EQ(caught, plan.cuda_present ? 7 : 6);
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
