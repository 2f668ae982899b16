// step_hygiene on recipes registered only here: correct code that clips or zeroes gradients another
// way passes (within the floating-point bound, not bitwise), the suite's own variants are caught by a
// wide margin with the cause each one has, and a lossy checkpoint is named as the precondition it
// breaks instead of a step-order bug.
#include <algorithm>
#include <cmath>
#include <sstream>

#include <gtest/gtest.h>

#include "harness/contract/registry.h"
#include "harness/runner.h"
#include "suites/generated/generated_run.h"
#include "suites/step_hygiene/batch_gradient.h"
#include "suites/tests/test_recipes.h"
#include "reference/reference_run.h"

namespace tc {
namespace {

using testing_recipes::run_one;
using testing_recipes::promise_status;

template <typename T>
RunFactory make() {
  return [] { return std::unique_ptr<tc::Run>(new T()); };
}

// The global gradient norm computed by hand in float64, the coefficient applied as a double
// scalar: the same clip as clip_grad_norm_, with other roundings.
class Float64GlobalNormClip : public ref::ReferenceRun {
 protected:
  void optimisation_step(const at::Tensor& loss) override {
    optimizer_->zero_grad(/*set_to_none=*/true);
    scaler_->scale(loss).backward();
    after_backward();
    scaler_->unscale_(*optimizer_);
    double sq = 0.0;
    for (const auto& p : model_->parameters()) {
      if (p.grad().defined()) sq += p.grad().to(torch::kDouble).pow(2).sum().item<double>();
    }
    const double coef = config_.clip_norm / (std::sqrt(sq) + 1e-6);
    if (coef < 1.0) {
      torch::NoGradGuard no_grad;
      for (auto& p : model_->parameters()) {
        if (p.grad().defined()) p.grad().mul_(coef);
      }
    }
    scaler_->step(*optimizer_);
    scaler_->update();
  }
};

// Per-parameter fp32 norms combined last to first, the coefficient a float tensor: another order.
class PerTensorNormsReversed : public ref::ReferenceRun {
 protected:
  void optimisation_step(const at::Tensor& loss) override {
    optimizer_->zero_grad(/*set_to_none=*/true);
    scaler_->scale(loss).backward();
    after_backward();
    scaler_->unscale_(*optimizer_);
    std::vector<at::Tensor> grads;
    for (const auto& p : model_->parameters()) {
      if (p.grad().defined()) grads.push_back(p.grad());
    }
    at::Tensor total = torch::zeros({}, torch::kFloat);
    for (auto it = grads.rbegin(); it != grads.rend(); ++it) total = total + it->norm().pow(2);
    const at::Tensor coef = torch::clamp_max(config_.clip_norm / (total.sqrt() + 1e-6), 1.0);
    {
      torch::NoGradGuard no_grad;
      for (auto& g : grads) g.mul_(coef);
    }
    scaler_->step(*optimizer_);
    scaler_->update();
  }
};

// Zeroes the gradients (assigns zeros) instead of setting them to none.
class ZeroGradToZeros : public ref::ReferenceRun {
 protected:
  void optimisation_step(const at::Tensor& loss) override {
    for (auto& p : model_->parameters()) {
      if (p.grad().defined()) p.grad().zero_();
    }
    scaler_->scale(loss).backward();
    after_backward();
    scaler_->unscale_(*optimizer_);
    torch::nn::utils::clip_grad_norm_(model_->parameters(), config_.clip_norm);
    scaler_->step(*optimizer_);
    scaler_->update();
  }
};

// The optimizer and its schedule built again at each epoch's start, each given the state of the one
// it replaces (the optimizer's state, the schedule's position): built twice, but nothing is lost.
// optimizer_built_once judges what the update shows (a fresh optimizer's step), not how often the
// object is made, so this passes.
class RebuiltWithStateHandedOver : public ref::ReferenceRun {
 protected:
  void begin_epoch() override {
    if (epoch_ > 0) {
      torch::serialize::OutputArchive opt_out, sched_out;
      optimizer_->save(opt_out);
      scheduler_->save(sched_out);
      std::stringstream opt_bytes, sched_bytes;
      opt_out.save_to(opt_bytes);
      sched_out.save_to(sched_bytes);
      std::unique_ptr<torch::optim::Optimizer> fresh = make_optimizer_for(parameters());
      torch::serialize::InputArchive opt_in, sched_in;
      opt_in.load_from(opt_bytes);
      sched_in.load_from(sched_bytes);
      fresh->load(opt_in);
      std::unique_ptr<ref::Schedule> schedule = make_schedule(*fresh);
      schedule->load(sched_in);
      scheduler_ = std::move(schedule);
      optimizer_ = std::move(fresh);
    }
    ReferenceRun::begin_epoch();
  }
};

TEST(StepHygieneEquivalents, AnOptimizerRebuiltWithItsStateHandedOverPasses) {
  const Cell c = run_one("step_hygiene", "rebuilt_with_state_handed_over", make<RebuiltWithStateHandedOver>());
  EXPECT_EQ(c.outcome, Outcome::kPass) << c.evidence;
  EXPECT_EQ(promise_status(c, "optimizer_built_once"), "held") << c.evidence;
  EXPECT_EQ(promise_status(c, "fresh_gradients"), "held") << c.evidence;
}

TEST(StepHygieneVariants, AnOptimizerBuiltInsideTheEpochLoopIsCaughtAtTheSecondEpochsFirstStep) {
  // The generator's mutant on two draws: gen-1 (6 steps an epoch) and gen-5 (12).
  for (const char* name : {"gen-1-rebuild_optimizer_each_epoch", "gen-5-rebuild_optimizer_each_epoch"}) {
    Registry reg;
    for (const CheckInfo& c : Registry::global().checks()) {
      if (c.name == "step_hygiene") reg.add_check(c);
    }
    for (const RecipeInfo& r : generated::recipes_named(name)) reg.add_recipe(r);
    RunPlan plan;
    plan.devices = {{"cpu", true, ""}};
    plan.checks = {"step_hygiene"};
    plan.recipes = {name};
    const Cell c = run_cells(reg, plan).at(0);
    EXPECT_EQ(c.verdict, Verdict::kOk) << name << ": " << c.evidence;  // a variant, caught
    EXPECT_EQ(promise_status(c, "optimizer_built_once"), "broken") << name << ": " << c.evidence;
    EXPECT_NE(c.evidence.find("freshly built optimizer"), std::string::npos) << c.evidence;
    // The steps before the boundary were judged clean.
    EXPECT_EQ(promise_status(c, "fresh_gradients"), "held") << name << ": " << c.evidence;
  }
}

TEST(StepHygieneEquivalents, Float64GlobalNormClipPasses) {
  const Cell c = run_one("step_hygiene", "float64_global_norm_clip", make<Float64GlobalNormClip>());
  EXPECT_EQ(c.outcome, Outcome::kPass) << c.evidence;
  EXPECT_EQ(promise_status(c, "fresh_gradients"), "held") << c.evidence;
  EXPECT_EQ(promise_status(c, "clip_between_backward_and_step"), "held") << c.evidence;
  ASSERT_TRUE(c.metrics.contains("max_ratio_to_bound")) << c.metrics.dump();
  EXPECT_LE(c.metrics["max_ratio_to_bound"].get<double>(), 1.0);
  EXPECT_NE(c.evidence.find("of the bound"), std::string::npos) << c.evidence;
  std::cout << "float64_global_norm_clip: " << c.evidence << "\n";
}

TEST(StepHygieneEquivalents, PerTensorNormsCombinedInAnotherOrderPass) {
  const Cell c = run_one("step_hygiene", "per_tensor_norms_reversed", make<PerTensorNormsReversed>());
  EXPECT_EQ(c.outcome, Outcome::kPass) << c.evidence;
  std::cout << "per_tensor_norms_reversed: " << c.evidence << "\n";
}

TEST(StepHygieneEquivalents, ZeroGradByAssigningZerosPasses) {
  const Cell c = run_one("step_hygiene", "zero_grad_to_zeros", make<ZeroGradToZeros>());
  EXPECT_EQ(c.outcome, Outcome::kPass) << c.evidence;
  EXPECT_EQ(promise_status(c, "fresh_gradients"), "held") << c.evidence;
}

// The splits batch_gradient tries, the common ones first: tensor_split's, every split(m) with that
// many parts (chunk's among them), the whole batch, then every other composition where at most 256.
TEST(StepHygieneBatchGradient, TheSplitsTriedStartWithTheCommonOnesAndCoverEveryComposition) {
  using step_hygiene::candidate_splits;
  const std::vector<std::vector<int64_t>> s = candidate_splits(16, 3);
  ASSERT_GE(s.size(), 4u);
  EXPECT_EQ(s[0], (std::vector<int64_t>{6, 5, 5}));   // torch.tensor_split(x, 3)
  EXPECT_EQ(s[1], (std::vector<int64_t>{6, 6, 4}));   // x.chunk(3), x.split(6)
  EXPECT_EQ(s[2], (std::vector<int64_t>{7, 7, 2}));   // x.split(7)
  EXPECT_EQ(s[3], (std::vector<int64_t>{16}));        // the whole batch, backpropagated 3 times
  EXPECT_EQ(s.size(), 105u + 1u);                     // C(15, 2) compositions, and the whole batch
  EXPECT_NE(std::find(s.begin(), s.end(), std::vector<int64_t>{4, 8, 4}), s.end());
  for (const auto& sizes : s) {
    int64_t total = 0;
    for (int64_t n : sizes) {
      EXPECT_GT(n, 0);
      total += n;
    }
    EXPECT_EQ(total, 16);
  }
  // Too many compositions (256 into 4: 2.7 million): the common ones only.
  const std::vector<std::vector<int64_t>> big = candidate_splits(256, 4);
  EXPECT_LT(big.size(), 64u);
  EXPECT_EQ(big[0], (std::vector<int64_t>{64, 64, 64, 64}));
  EXPECT_EQ(candidate_splits(16, 1), (std::vector<std::vector<int64_t>>{{16}}));
}

// Each of the suite's variants: caught by the promise it breaks, with the cause it has (proven by
// a replay that reproduces the update), and a margin of at least 100 times the bound.
TEST(StepHygieneVariants, CaughtByAWideMarginWithTheCauseProven) {
  struct Case {
    const char* recipe;
    const char* promise;
    const char* cause;
  };
  for (const Case& k : {Case{"no_zero_grad", "fresh_gradients", "gradients accumulate across steps"},
                        Case{"clip_after_step", "clip_between_backward_and_step",
                             "clipping did not happen between backward and step"},
                        Case{"zero_grad_before_step", "fresh_gradients", "a step with no gradient at all"},
                        Case{"undivided_accumulation", "batch_gradient",
                             "each micro-batch's mean loss was backpropagated undivided"}}) {
    const Cell c = run_one("step_hygiene", k.recipe);
    EXPECT_EQ(c.outcome, Outcome::kFail) << k.recipe << ": " << c.evidence;
    EXPECT_EQ(promise_status(c, k.promise), "broken") << k.recipe << ": " << c.evidence;
    EXPECT_NE(c.evidence.find(k.cause), std::string::npos) << k.recipe << ": " << c.evidence;
    EXPECT_EQ(c.evidence.find("not determined"), std::string::npos) << k.recipe << ": " << c.evidence;
    if (std::string(k.promise) == "batch_gradient") {
      // Judged by the gradient's scale against the batch's: 4 micro-batches undivided, 4x.
      ASSERT_TRUE(c.metrics.contains("batch_gradient")) << c.metrics.dump();
      EXPECT_NEAR(c.metrics["batch_gradient"]["scale"].get<double>(), 4.0, 1e-3) << c.evidence;
      EXPECT_EQ(promise_status(c, "fresh_gradients"), "held") << c.evidence;
      std::cout << k.recipe << ": " << c.evidence << "\n";
      continue;
    }
    ASSERT_TRUE(c.metrics.contains("caught")) << c.metrics.dump();
    EXPECT_GE(c.metrics["caught"]["margin"].get<double>(), 100.0) << k.recipe << ": " << c.evidence;
    std::cout << k.recipe << ": margin " << c.metrics["caught"]["margin"].get<double>() << "x the bound\n  "
              << c.evidence << "\n";
  }
}

// resume_equality's variants break the checkpoint step_hygiene replays from: the cell names that
// precondition and the check that covers it, and is skipped (not a step-order failure).
TEST(StepHygieneMisattribution, ALossyCheckpointIsNamedAsThePreconditionNotAStepOrderBug) {
  for (const char* recipe : {"weights_only_checkpoint", "no_optimizer_state"}) {
    const Cell c = run_one("step_hygiene", recipe);
    EXPECT_EQ(c.verdict, Verdict::kSkipped) << recipe << ": " << c.evidence;
    EXPECT_EQ(c.evidence.rfind("precondition not met", 0), 0u) << recipe << ": " << c.evidence;
    EXPECT_NE(c.evidence.find("resume_equality covers"), std::string::npos) << c.evidence;
    EXPECT_NE(c.evidence.find("optimizer state"), std::string::npos) << c.evidence;
    EXPECT_EQ(c.evidence.find("clipping"), std::string::npos) << c.evidence;
    std::cout << recipe << ": " << c.evidence << "\n";
    // The other check still catches it.
    const Cell r = run_one("resume_equality", recipe);
    EXPECT_EQ(r.outcome, Outcome::kFail) << r.evidence;
  }
}

}  // namespace
}  // namespace tc
