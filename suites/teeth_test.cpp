// The checks' teeth, tested through the real registry: the exact set of variants, the checks that
// must catch each and the promises each breaks there; a variant made harmless is reported as
// `missed` (a check that cannot fail would be visible), also through the command line's exit code.
//
// That every variant is caught by the promises it declares, and the reference holds every promise
// with a clear margin, is asserted on the cells the conformance ctests run anyway
// (conformance.cpu.<check>.<recipe>, suites/teeth_cell.py): no cell is computed twice.
#include <algorithm>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "harness/contract/registry.h"
#include "harness/runner.h"
#include "reference/reference_run.h"
#include "suites/tests/test_recipes.h"

namespace tc {
namespace {

// Declares that reproducibility must catch it, but breaks nothing.
class HarmlessVariant : public ref::ReferenceRun {};

// The same as a test recipe of `tc_suite_tests run` (suites/suite_binary_main.cpp): a variant that
// eval_mode must catch by eval_bitwise, breaking nothing; cli.uncaught_variant_exits_1 runs it and
// expects `missed` and exit 1 from the command line.
[[maybe_unused]] const bool kHarmlessForEvalMode = testing_recipes::add(RecipeInfo{
    "harmless_for_eval_mode", "declares eval_mode must catch it, breaks nothing", {"eval_mode"},
    [] { return std::unique_ptr<::tc::Run>(new HarmlessVariant()); }, __FILE__, __LINE__, "", false,
    {{"eval_mode", {"eval_bitwise"}}}});

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
      {"order_drawn_once", {"data_saturation"}},
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
      {"undivided_accumulation", {"step_hygiene"}},
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
  EXPECT_EQ(got.size(), 41u);
  EXPECT_EQ(got, want);
}

// Every variant names, for each check it targets, the promises it breaks there (->Breaks): its
// conformance cell asserts exactly those broken (suites/teeth_cell.py), and the runner calls it
// `missed` when only another promise caught it. The timing promises, which the machine's speed can
// break too, are the ones registered as such.
TEST(Teeth, EveryVariantDeclaresThePromisesItBreaksInEachCheckItTargets) {
  for (const RecipeInfo& r : Registry::global().recipes()) {
    if (!r.is_variant()) continue;
    std::vector<std::string> declared;
    for (const auto& [check, promises] : r.breaks) {
      declared.push_back(check);
      EXPECT_FALSE(promises.empty()) << r.name << " in " << check;
    }
    std::vector<std::string> targets = r.targets;
    std::sort(targets.begin(), targets.end());
    EXPECT_EQ(declared, targets) << r.name << " (" << r.file << ":" << r.line << ")";
  }
  std::set<std::string> timing;
  for (const CheckInfo& c : Registry::global().checks()) {
    for (const PromiseInfo& p : c.promises) {
      if (p.timing) timing.insert(c.name + "." + p.id);
    }
  }
  EXPECT_EQ(timing, (std::set<std::string>{"amp.amp_procedure_speed", "amp.throughput", "data_saturation.data_wait",
                                           "data_saturation.async_copy", "torch_compile.compiled_not_slower"}));
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

}  // namespace
}  // namespace tc
