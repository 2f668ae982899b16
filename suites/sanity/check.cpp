// sanity: the recipe's training does something a check can judge. A fresh run of one epoch (at most
// kSanitySteps steps): an epoch has steps, each loss is finite, the parameters stay finite, and the
// loss is not bitwise the same at every step (harness/contract/sanity.h). Where this cell fails, the
// runner skips the recipe's other cells with the same finding as their precondition: a bitwise
// comparison over NaN, or over zero steps, proves nothing.
#include "harness/contract/sanity.h"
#include "suites/support/kit.h"
#include "suites/support/tensor_compare.h"

namespace tc {

CheckResult check_sanity(const CheckContext& ctx) {
  Findings f;
  for (const SanityFinding& s : training_sanity(ctx.make_run, run_options(ctx, ctx.seed))) {
    if (!s.judged) {
      f.recorded(s.promise, s.evidence);
    } else if (s.held) {
      f.held(s.promise, s.evidence);
    } else {
      f.broken(s.promise, s.evidence);
    }
  }
  return f.result();
}

TC_CHECK(sanity, "training does something to judge: an epoch has steps, the loss and the parameters stay finite, the loss moves")
    ->Promise("has_steps", "steps_per_epoch() is at least 1")
    ->Promise("finite_loss", "every loss of a fresh run's first steps is finite")
    ->Promise("finite_parameters", "the parameters are finite after those steps")
    ->Promise("loss_moves", "the loss is not bitwise the same at every one of those steps")
    ->CorrectRecipesOnly()
    ->NoSanityPrecondition()
    ->Timeout(300);

}  // namespace tc
