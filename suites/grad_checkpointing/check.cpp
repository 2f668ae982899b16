// grad_checkpointing: with activation recomputation on, gradients equal plain backprop bitwise,
// and the activation memory held from the end of the forward to the backward (the peak of
// activation memory over the forward) is lower than plain backprop's by what checkpointing must
// save: half of what the backward recomputes, and 10% at least (peak_memory_lower). The peak over
// forward + backward is reported too, not judged: with a single recomputed segment, as in the
// reference model, the recomputation in backward brings the activations back, so only models with
// several segments lower that peak. A recipe that does no activation checkpointing
// (Run::does_activation_checkpointing() false: a model of its own with no checkpointed segment) is
// skipped with that reason: a model that never claimed to recompute has nothing to save.
#include <torch/torch.h>

#include "harness/util/text_format.h"
#include "suites/support/peak_memory.h"
#include "suites/support/kit.h"
#include "suites/support/tensor_compare.h"

namespace tc {
namespace {

struct Pass {
  NamedTensors grads;
  int64_t frozen = 0;    // parameters that do not require a gradient
  int64_t retained = 0;  // live after the forward: activations kept for backward
  int64_t peak = 0;      // over forward + backward
  std::string method;
};

Pass forward_backward(const CheckContext& ctx, bool recompute) {
  RunOptions opts = run_options(ctx, ctx.seed);
  opts.activation_checkpointing = recompute;
  std::unique_ptr<Run> run = fresh_run(ctx, opts);
  if (!run->does_activation_checkpointing()) {
    throw SkipCell("precondition: '" + ctx.recipe + "' does no activation checkpointing (its model has no "
                   "checkpointed segment: Run::does_activation_checkpointing() is false; a Python recipe's class "
                   "attribute does_activation_checkpointing), so there is nothing to "
                   "compare with plain backprop");
  }
  const at::Tensor x = run->example_input(64);  // a batch that does not require grad, as data is
  torch::manual_seed(static_cast<uint64_t>(ctx.seed));  // the same dropout masks in both passes
  Pass p;
  {
    PeakMemory meter(x.device());
    at::Tensor loss = run->forward_train(x).logsumexp(1).mean();
    p.retained = meter.current_bytes();
    loss.backward();
    p.peak = meter.peak_bytes();
    p.method = meter.method();
  }
  for (const auto& [name, t] : run->parameters()) {
    if (!t.requires_grad()) ++p.frozen;
    p.grads.emplace_back(name, t.grad().defined() ? t.grad().detach().cpu().clone() : at::Tensor());
  }
  return p;
}

void gradients_equal(const Pass& plain, const Pass& recomputed, Findings& out) {
  std::string missing;
  for (size_t i = 0; i < plain.grads.size(); ++i) {
    if (plain.grads[i].second.defined() && !recomputed.grads[i].second.defined()) {
      missing += (missing.empty() ? "" : ", ") + plain.grads[i].first;
    }
  }
  if (!missing.empty()) {
    out.broken("gradients_equal", "with recomputation these parameters got no gradient (the input did not "
                                  "require one): " + missing);
  } else if (auto d = first_tensor_difference(plain.grads, recomputed.grads)) {
    out.broken("gradients_equal", "gradient of '" + d->name + "' differs from plain backprop (max |diff| " +
                                      fmt::sig(d->max_abs_diff, 3) + ")" + d->detail);
  } else {
    out.held("gradients_equal", "gradients of " + std::to_string(plain.grads.size()) +
                                    " parameters bitwise equal to plain backprop");
  }
}

// Activation memory kept from the end of the forward to the backward: lower by what checkpointing
// must save. What the recomputation brings back in backward is what a checkpoint did not keep: the
// backward's rise above the memory kept, beyond plain backprop's rise (its gradient buffers),
//   recomputed = (peak_r - kept_r) - (peak_p - kept_p),
// so the memory kept must be lower by at least half of that (room for the estimate: the reference
// saves 0.83 of it), and by 10% at least (a recipe that recomputes nothing saves nothing). Judged
// as deviation = required saving / actual saving against the bar 1 (margin = deviation): a forward
// that ignores the option saves nothing (margin: the required bytes over 1 byte), one that
// recomputes and still keeps 85% of plain's activations saves a fifth of what it must.
void peak_memory_lower(const Pass& plain, const Pass& recomputed, Findings& out) {
  constexpr double kMinShare = 0.1, kOfRecomputed = 0.5;
  const double ratio =
      static_cast<double>(recomputed.retained) / static_cast<double>(std::max<int64_t>(plain.retained, 1));
  const int64_t saved = plain.retained - recomputed.retained;
  const int64_t brought_back =
      std::max<int64_t>(0, (recomputed.peak - recomputed.retained) - (plain.peak - plain.retained));
  const double required =
      std::max(kMinShare * static_cast<double>(plain.retained), kOfRecomputed * static_cast<double>(brought_back));
  const double deviation = required / static_cast<double>(std::max<int64_t>(saved, 1));
  nlohmann::json& m = out.metrics();
  m["activation_bytes_plain"] = plain.retained;
  m["activation_bytes_recompute"] = recomputed.retained;
  m["activation_ratio"] = ratio;
  m["step_peak_bytes_plain"] = plain.peak;
  m["step_peak_bytes_recompute"] = recomputed.peak;
  m["recomputed_bytes_estimate"] = brought_back;
  m["required_saving_bytes"] = required;
  m["memory_method"] = plain.method;
  const std::string what =
      "activation memory kept for backward " + std::to_string(recomputed.retained) + " vs " +
      std::to_string(plain.retained) + " bytes (" + fmt::sig(ratio * 100, 3) + "%: " + std::to_string(saved) +
      " saved); the backward brought back about " + std::to_string(brought_back) +
      " bytes (its rise beyond plain backprop's), so the saving must be at least " +
      fmt::sig(required, 6) + " bytes (half of that, and 10% of plain's)";
  if (deviation > 1.0 && recomputed.frozen > 0) {
    // Frozen parameters (fine-tuning): a checkpointed segment whose parameters and input need no
    // gradient keeps nothing for backward even without checkpointing, so there is nothing to save,
    // and this measurement cannot tell that segment from one whose checkpointing was ignored.
    out.recorded("activation_memory_lower", what + ": not judged: " + std::to_string(recomputed.frozen) +
                                                " parameters are frozen (requires_grad false), and a checkpointed "
                                                "segment that needs no gradient has nothing to save");
  } else if (deviation > 1.0) {
    out.broken("activation_memory_lower", what + ": checkpointing does not save what it recomputes", deviation, 1.0);
  } else {
    out.held("activation_memory_lower", what + "; step peak " + std::to_string(recomputed.peak) + " vs " +
                                            std::to_string(plain.peak) + " bytes (reported, not judged); measured by " +
                                            plain.method,
             deviation, 1.0);
  }
}

CheckResult check_grad_checkpointing(const CheckContext& ctx) {
  const Pass plain = forward_backward(ctx, false);
  const Pass recomputed = forward_backward(ctx, true);
  Findings f;
  gradients_equal(plain, recomputed, f);
  peak_memory_lower(plain, recomputed, f);
  return f.result("forward + backward, recomputation vs plain:");
}

}  // namespace
}  // namespace tc

namespace tc {
TC_CHECK(grad_checkpointing,
         "recomputed activations give gradients equal to plain backprop; activation memory kept for "
         "backward lower by at least half of what the backward recomputes, and by 10%")
    ->Promise("gradients_equal", "recomputed activations give gradients equal to plain backprop")
    ->Promise("activation_memory_lower",
              "activation memory kept from the forward for the backward is lower by at least half of what "
              "the backward recomputes, and by at least 10% (the step's peak is reported, not judged)");
}  // namespace tc
