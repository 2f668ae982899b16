// amp's underflow and parity promises on recipes registered only here: a correct recipe whose
// scaled fp16 loss overflows at the initial scale passes underflow (the skip recorded as what it
// is), and a broken resume or an unreproducible run is named as the precondition parity needs, not
// as a precision failure.
#include <gtest/gtest.h>

#include "harness/contract/registry.h"
#include "harness/runner.h"
#include "suites/tests/test_recipes.h"
#include "reference/autocast.h"
#include "reference/reference_run.h"

namespace tc {
namespace {

using testing_recipes::run_one;
using testing_recipes::promise_status;

// The loss computed in fp16 under CPU autocast (log_softmax on the fp16 logits, the negative
// log-likelihood gathered and averaged by hand, no cast to fp32), weighted in fp16 as the
// reference weights its loss: correct; at the initial scale 2^16 the gradient the fp16 loss receives
// in backward is the scale itself, above fp16's largest 65504, so the scaler skips the step.
class Fp16Loss : public ref::ReferenceRun {
 protected:
  at::Tensor forward_loss(const at::Tensor& x, const at::Tensor& y) override {
    std::optional<ref::AutocastGuard> autocast;
    if (amp_on()) autocast.emplace(options_.device.type(), amp_.dtype);
    const at::Tensor logits = model_->forward(x);
    const at::Tensor log_probs = torch::log_softmax(logits, 1, logits.scalar_type());
    const at::Tensor loss = -log_probs.gather(1, y.unsqueeze(1)).mean();  // the negative log-likelihood
    return amp_.loss_weight == 1.0 ? loss : loss * amp_.loss_weight;
  }
};

TEST(AmpUnderflow, AnFp16LossThatOverflowsAtTheInitialScaleIsRecordedNotAnUnderflow) {
  const Cell c = run_one("amp", "fp16_loss", [] { return std::unique_ptr<tc::Run>(new Fp16Loss()); });
  EXPECT_EQ(promise_status(c, "underflow"), "recorded,held") << c.evidence;
  EXPECT_NE(c.evidence.find("overflow: at the initial scale 6.554e+04 the GradScaler skipped the fp16 step"),
            std::string::npos) << c.evidence;
  EXPECT_EQ(c.evidence.find("left non-finite gradients"), std::string::npos) << c.evidence;
  ASSERT_TRUE(c.metrics.contains("underflow_overflow_skips")) << c.metrics.dump();
  ASSERT_GE(c.metrics["underflow_overflow_skips"].size(), 1u);
  EXPECT_EQ(c.metrics["underflow_overflow_skips"][0]["scale"].get<double>(), 65536.0);
  EXPECT_EQ(c.metrics["underflow"]["scale"].get<double>(), 32768.0) << c.metrics["underflow"].dump();
  std::cout << c.evidence << "\n";
}

// resume_equality's and reproducibility's variants break what parity's fp32 run starts from: the
// parity promise is recorded as not judged, naming the precondition and the check covering it.
TEST(AmpParityMisattribution, ABrokenResumeOrSeedIsNamedAsThePreconditionNotAPrecisionBug) {
  struct Case {
    const char* recipe;
    const char* dtype;
    const char* covers;
  };
  for (const Case& k : {Case{"weights_only_checkpoint", "fp16", "resume_equality"},
                        Case{"no_optimizer_state", "fp16", "resume_equality"},
                        Case{"no_seed", "bf16", "reproducibility"}}) {
    const Cell c = run_one("amp", k.recipe);
    EXPECT_EQ(c.evidence.find("- " + std::string(k.dtype) + " parity"), std::string::npos) << k.recipe << ": " << c.evidence;
    EXPECT_NE(c.evidence.find(std::string(k.dtype) + " parity not judged: precondition not met"), std::string::npos)
        << k.recipe << ": " << c.evidence;
    EXPECT_NE(c.evidence.find(std::string(k.covers) + " covers this"), std::string::npos) << c.evidence;
    EXPECT_NE(promise_status(c, "parity").find("recorded"), std::string::npos) << c.evidence;
    EXPECT_EQ(promise_status(c, "parity").find("broken"), std::string::npos) << c.evidence;
    std::cout << k.recipe << ": " << c.evidence << "\n";
  }
}

}  // namespace
}  // namespace tc
