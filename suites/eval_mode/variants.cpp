// Broken variants the eval_mode check must catch ("Set the mode, and turn gradients off for
// evaluation").
#include <torch/torch.h>

#include "harness/contract/registry.h"
#include "reference/reference_run.h"

namespace tc::variants {

// Fail: evaluates under no_grad but never calls model.eval(): dropout stays on, BatchNorm uses
// batch statistics and updates its running stats.
class NoEval : public ref::ReferenceRun {
 public:
  EvalResult evaluate() override {
    torch::NoGradGuard no_grad;
    return eval_loop();
  }
};

// model.eval() without no_grad: every evaluation builds an autograd graph.
class NoGradGuardMissing : public ref::ReferenceRun {
 public:
  EvalResult evaluate() override {
    model_->eval();
    return eval_loop();
  }
};

// model.eval() without no_grad, the outputs detached before they are returned: the logits carry no
// graph, but every forward records one (and holds its activations until the outputs are detached).
class DetachInsteadOfNoGrad : public ref::ReferenceRun {
 public:
  EvalResult evaluate() override {
    model_->eval();
    EvalResult r = eval_loop();
    r.logits = r.logits.detach();
    return r;
  }
};

// The training loop never sets model.train() back at the top of the next epoch.
class NoTrainAfterEval : public ref::ReferenceRun {
 protected:
  void begin_epoch() override { sampler_->set_epoch(epoch_); }
};

}  // namespace tc::variants

TC_RECIPE(tc::variants::NoEval, "no_eval",
          "evaluate() never calls model.eval()")
    ->MustBeCaughtBy({"eval_mode"})
    ->Breaks("eval_mode", {"eval_bitwise", "bn_stats_untouched"});
TC_RECIPE(tc::variants::NoGradGuardMissing, "no_grad_guard_missing",
          "evaluate() runs without torch::NoGradGuard")
    ->MustBeCaughtBy({"eval_mode"})
    ->Breaks("eval_mode", {"no_autograd_graph"});
TC_RECIPE(tc::variants::DetachInsteadOfNoGrad, "detach_instead_of_no_grad",
          "evaluate() runs without torch::NoGradGuard and detaches the outputs before returning them")
    ->MustBeCaughtBy({"eval_mode"})
    ->Breaks("eval_mode", {"no_autograd_graph"});
TC_RECIPE(tc::variants::NoTrainAfterEval, "no_train_after_eval",
          "the next epoch does not call model.train()")
    ->MustBeCaughtBy({"eval_mode"})
    ->Breaks("eval_mode", {"train_mode_restored"});
