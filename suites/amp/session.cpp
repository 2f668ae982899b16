#include "suites/amp/session.h"

#include <cmath>
#include <stdexcept>
#include <vector>

#include <torch/torch.h>

#include "suites/support/kit.h"
#include "suites/support/numbers.h"
#include "suites/support/tensor_compare.h"

namespace tc::amp {

Amp fresh(const CheckContext& ctx, const AmpOptions& options) {
  auto r = fresh_run_with<AmpProbe>(ctx, "tc::AmpProbe (harness/contract/amp_probe.h)",
                                   "its mixed precision cannot be switched on from outside");
  Amp a{std::move(r.run), r.probe};
  a.probe->set_amp(options);
  a.run->setup(run_options(ctx, ctx.seed));
  return a;
}

AmpOptions amp_options(c10::ScalarType dtype, double loss_weight) {
  AmpOptions o;
  o.dtype = dtype;
  o.loss_weight = loss_weight;
  return o;
}

// Unit roundoff of the lower-precision dtype (half the distance from 1 to the next number).
double unit_roundoff(c10::ScalarType t) { return std::ldexp(1.0, t == c10::kHalf ? -11 : -8); }

// Every parameter (or its gradient), flattened into one float64 CPU vector, in order.
at::Tensor flat(const NamedTensors& params, bool grads) {
  std::vector<at::Tensor> parts;
  for (const auto& [n, p] : params) {
    at::Tensor t = grads ? p.grad() : p;
    if (!t.defined()) continue;
    parts.push_back(t.detach().to(torch::kCPU, torch::kDouble).flatten());
  }
  return parts.empty() ? torch::zeros({0}, torch::kDouble) : torch::cat(parts);
}

double l2(const at::Tensor& t) { return t.norm().item<double>(); }

// A recipe that overrides its step without calling AmpProbe's after-backward hook cannot be
// measured; that is the recipe's failure (outcome fail), not the harness's.
[[noreturn]] void hook_not_called() {
  throw std::runtime_error(
      "the recipe's train step never called the AmpProbe after-backward hook (set_after_backward), so "
      "its raw gradients cannot be measured");
}

}  // namespace tc::amp
