// eval_mode on recipes written otherwise than the reference: an evaluation under
// torch::InferenceMode passes; one without a no-grad guard is caught whether or not it detaches its
// outputs before returning them (the graph is observed inside the forward, not on the logits).
#include <gtest/gtest.h>

#include "reference/reference_run.h"
#include "suites/tests/test_recipes.h"

namespace tc {
namespace {

// torch::InferenceMode instead of torch::NoGradGuard: no graph, and lighter still.
class InferenceModeEval : public ref::ReferenceRun {
 public:
  EvalResult evaluate() override {
    torch::InferenceMode inference;
    model_->eval();
    return eval_loop();
  }
};

using testing_recipes::promise_status;
using testing_recipes::run_one;

TEST(EvalModeRecipes, TheReferenceRecordsNoGraphInsideTheForward) {
  const Cell c = run_one("eval_mode", "reference");
  EXPECT_EQ(c.outcome, Outcome::kPass) << c.evidence;
  EXPECT_EQ(promise_status(c, "no_autograd_graph"), "held") << c.evidence;
  EXPECT_GT(c.metrics.value("eval_operators", 0), 0) << c.metrics.dump();
  EXPECT_EQ(c.metrics.value("eval_operators_recording_grad", -1), 0) << c.metrics.dump();
}

TEST(EvalModeRecipes, InferenceModeInsteadOfNoGradGuardPasses) {
  const Cell c = run_one("eval_mode", "inference_mode_eval");
  EXPECT_EQ(c.outcome, Outcome::kPass) << c.evidence;
  EXPECT_EQ(promise_status(c, "no_autograd_graph"), "held") << c.evidence;
  EXPECT_EQ(c.metrics.value("eval_operators_recording_grad", -1), 0) << c.metrics.dump();
}

TEST(EvalModeRecipes, DetachedOutputsWithoutNoGradAreCaughtInsideTheForward) {
  const Cell c = run_one("eval_mode", "detach_instead_of_no_grad");
  EXPECT_EQ(c.verdict, Verdict::kOk) << c.evidence;
  EXPECT_EQ(promise_status(c, "no_autograd_graph"), "broken") << c.evidence;
  EXPECT_EQ(promise_status(c, "eval_bitwise"), "held") << c.evidence;
  EXPECT_GT(c.metrics.value("eval_operators_recording_grad", 0), 0) << c.metrics.dump();
  EXPECT_EQ(c.evidence.find("logits have grad_fn"), std::string::npos) << c.evidence;  // the logits are clean
  std::cout << c.evidence << "\n";
}

TEST(EvalModeRecipes, NoGradGuardMissingIsStillCaught) {
  const Cell c = run_one("eval_mode", "no_grad_guard_missing");
  EXPECT_EQ(c.verdict, Verdict::kOk) << c.evidence;
  EXPECT_EQ(promise_status(c, "no_autograd_graph"), "broken") << c.evidence;
  EXPECT_NE(c.evidence.find("logits have grad_fn"), std::string::npos) << c.evidence;
}

}  // namespace
}  // namespace tc

TC_TEST_RECIPE(tc::InferenceModeEval, "inference_mode_eval", "evaluates under torch::InferenceMode");
