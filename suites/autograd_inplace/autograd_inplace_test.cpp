// autograd_inplace's gradient recomputation on recipes registered only here: a write that bumps no
// version counter is caught by a wide margin; a correct recipe that writes through .data into a
// copy, or computes its loss another way, passes.
#include <gtest/gtest.h>

#include "harness/contract/registry.h"
#include "harness/runner.h"
#include "suites/tests/test_recipes.h"
#include "reference/reference_run.h"

namespace tc {
namespace {

using testing_recipes::run_one;
using testing_recipes::promise_status;

// The image logger gets its own copy, normalised through .data: autograd saved the original.
class LoggerOnACopy : public ref::ReferenceRun {
 protected:
  at::Tensor forward_loss(const at::Tensor& x, const at::Tensor& y) override {
    at::Tensor loss = ReferenceRun::forward_loss(x, y);
    at::Tensor for_logger = x.clone();
    for_logger.variable_data().mul_(0.5).add_(0.5);
    return loss;
  }
};

// The loss as log_softmax + nll_loss (the probe's training_loss stays cross_entropy): the same
// mathematics, other roundings.
class LogSoftmaxNll : public ref::ReferenceRun {
 protected:
  at::Tensor forward_loss(const at::Tensor& x, const at::Tensor& y) override {
    return torch::nll_loss(torch::log_softmax(model_->forward(x), 1), y);
  }
};

TEST(AutogradInplaceRecompute, TheReferencePasses) {
  const Cell c = run_one("autograd_inplace", "reference");
  EXPECT_EQ(c.outcome, Outcome::kPass) << c.evidence;
  EXPECT_EQ(promise_status(c, "gradient_recomputes"), "held") << c.evidence;
  std::cout << c.evidence << "\n";
}

TEST(AutogradInplaceRecompute, CorrectRecipesWrittenDifferentlyPass) {
  for (auto [name, make] : std::vector<std::pair<std::string, RunFactory>>{
           {"logger_on_a_copy", [] { return std::unique_ptr<tc::Run>(new LoggerOnACopy()); }},
           {"log_softmax_nll", [] { return std::unique_ptr<tc::Run>(new LogSoftmaxNll()); }}}) {
    const Cell c = run_one("autograd_inplace", name, make);
    EXPECT_EQ(c.outcome, Outcome::kPass) << name << ": " << c.evidence;
    EXPECT_EQ(promise_status(c, "gradient_recomputes"), "held") << name << ": " << c.evidence;
    std::cout << name << ": " << c.evidence << "\n";
  }
}

TEST(AutogradInplaceRecompute, AWriteThatBumpsNoVersionCounterIsCaughtByAWideMargin) {
  const Cell c = run_one("autograd_inplace", "silent_inplace_on_saved");
  EXPECT_EQ(c.outcome, Outcome::kFail) << c.evidence;
  EXPECT_EQ(promise_status(c, "gradient_recomputes"), "broken") << c.evidence;
  EXPECT_EQ(promise_status(c, "no_inplace_on_saved"), "held") << c.evidence;  // the counters saw nothing
  ASSERT_TRUE(c.metrics.contains("caught")) << c.metrics.dump();
  EXPECT_GE(c.metrics["caught"]["margin"].get<double>(), 10.0) << c.evidence;
  std::cout << "margin " << c.metrics["caught"]["margin"].get<double>() << ": " << c.evidence << "\n";
  // The version-counter variant is still caught by its own promise.
  const Cell v = run_one("autograd_inplace", "inplace_on_saved");
  EXPECT_EQ(promise_status(v, "no_inplace_on_saved"), "broken") << v.evidence;
}

}  // namespace
}  // namespace tc
