// grad_checkpointing: with activation recomputation on, gradients equal plain backprop bitwise,
// and the activation memory held from the end of the forward to the backward (the peak of
// activation memory over the forward) is at least 10% lower than plain backprop's. The peak over
// forward + backward is reported too, not judged: with a single recomputed segment, as in the
// reference model, the recomputation in backward brings the activations back, so only models with
// several segments lower that peak.
#include <torch/torch.h>

#include "suites/support/peak_memory.h"
#include "suites/support/kit.h"
#include "suites/support/tensor_compare.h"

namespace tc {
namespace {

struct Pass {
  NamedTensors grads;
  int64_t retained = 0;  // live after the forward: activations kept for backward
  int64_t peak = 0;      // over forward + backward
  std::string method;
};

Pass forward_backward(const CheckContext& ctx, bool recompute) {
  RunOptions opts = run_options(ctx, ctx.seed);
  opts.activation_checkpointing = recompute;
  std::unique_ptr<Run> run = ctx.make_run();
  run->setup(opts);
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
                                      format_double(d->max_abs_diff, 3) + ")" + d->detail);
  } else {
    out.held("gradients_equal", "gradients of " + std::to_string(plain.grads.size()) +
                                    " parameters bitwise equal to plain backprop");
  }
}

// Activation memory kept from the end of the forward to the backward: at least 10% lower. The
// deviation judged is the ratio recomputed / plain against the bar 0.9 (margin = ratio / 0.9).
void peak_memory_lower(const Pass& plain, const Pass& recomputed, Findings& out) {
  constexpr double kBar = 0.9;
  const double ratio =
      static_cast<double>(recomputed.retained) / static_cast<double>(std::max<int64_t>(plain.retained, 1));
  nlohmann::json& m = out.metrics();
  m["activation_bytes_plain"] = plain.retained;
  m["activation_bytes_recompute"] = recomputed.retained;
  m["activation_ratio"] = ratio;
  m["step_peak_bytes_plain"] = plain.peak;
  m["step_peak_bytes_recompute"] = recomputed.peak;
  m["memory_method"] = plain.method;
  const std::string bytes = std::to_string(recomputed.retained) + " vs " + std::to_string(plain.retained) + " bytes";
  if (ratio > kBar) {
    out.broken("activation_memory_lower",
               "activation memory kept for backward with recomputation is " + format_double(ratio * 100, 3) +
                   "% of plain backprop's (" + bytes + "), not at least 10% lower",
               ratio, kBar);
  } else {
    out.held("activation_memory_lower",
             "activation memory kept for backward " + bytes + " (" + format_double(ratio * 100, 3) +
                 "%); step peak " + std::to_string(recomputed.peak) + " vs " + std::to_string(plain.peak) +
                 " bytes (reported, not judged); measured by " + plain.method,
             ratio, kBar);
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
         "backward at least 10% lower")
    ->Promise("gradients_equal", "recomputed activations give gradients equal to plain backprop")
    ->Promise("activation_memory_lower",
              "activation memory kept from the forward for the backward is at least 10% lower (the step's "
              "peak is reported, not judged)");
}  // namespace tc
