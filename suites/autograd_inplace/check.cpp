// autograd_inplace: training never mutates a tensor that autograd saved. LibTorch's version
// counters detect it at backward; the check trains an epoch and reports that error as evidence.
#include <torch/torch.h>

#include "suites/support/kit.h"
#include "suites/support/tensor_compare.h"

namespace tc {
namespace {

CheckResult check_autograd_inplace(const CheckContext& ctx) {
  std::unique_ptr<Run> run = ctx.make_run();
  run->setup(run_options(ctx, ctx.seed));
  const int64_t steps = run->steps_per_epoch();
  int64_t done = 0;
  Findings f;
  try {
    for (; done < steps; ++done) {
      StepRecord r = run->train_step();
      if (!std::isfinite(r.loss)) throw HarnessError("non-finite loss at step " + std::to_string(done));
    }
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    if (what.find("modified by an inplace operation") == std::string::npos) throw;
    f.metrics()["failed_step"] = done;
    f.broken("no_inplace_on_saved", "step " + std::to_string(done) + ": " + what.substr(0, what.find("Hint:")));
    return f.result();
  }
  f.metrics()["steps"] = steps;
  f.held("no_inplace_on_saved", std::to_string(steps) +
                                    " training steps: no tensor saved for backward was modified in place "
                                    "(LibTorch's version counters never fired)");
  return f.result();
}

}  // namespace
}  // namespace tc

namespace tc {
TC_CHECK(autograd_inplace,
         "training never mutates a tensor autograd saved")
    ->Promise("no_inplace_on_saved", "training never mutates a tensor autograd saved")
    // LibTorch's version-counter error: the practice this check owns, wherever a cell meets it.
    ->DetectsByThrowing("no_inplace_on_saved", "modified by an inplace operation");
}  // namespace tc
