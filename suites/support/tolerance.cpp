#include "suites/support/tolerance.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include <torch/torch.h>

#include "harness/util/text_format.h"
#include "suites/support/tensor_compare.h"

namespace tc {

double unit_roundoff_of(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kDouble: return std::ldexp(1.0, -53);
    case c10::kFloat: return std::ldexp(1.0, -24);
    case c10::kHalf: return std::ldexp(1.0, -11);
    case c10::kBFloat16: return std::ldexp(1.0, -8);
    default: throw std::invalid_argument(std::string("no unit roundoff for ") + c10::toString(dtype));
  }
}

Tolerance compare_within(const NamedTensors& actual, const NamedTensors& expected, const NamedTensors& bound) {
  const double inf = std::numeric_limits<double>::infinity();
  Tolerance worst;
  auto incomparable = [&](const std::string& name, const std::string& why) {
    worst = Tolerance{};
    worst.name = name;
    worst.ratio = worst.max_abs_diff = worst.diff = inf;
    worst.detail = why;
    return worst;
  };
  if (actual.size() != expected.size() || actual.size() != bound.size()) {
    return incomparable("", "different tensor counts (" + std::to_string(actual.size()) + " vs " +
                                std::to_string(expected.size()) + ", bounds " + std::to_string(bound.size()) + ")");
  }
  for (size_t i = 0; i < actual.size(); ++i) {
    const auto& [name, a] = actual[i];
    const auto& [ename, e] = expected[i];
    if (name != ename || name != bound[i].first) {
      return incomparable(name, "tensor names differ: '" + name + "' vs '" + ename + "'");
    }
    if (!a.defined() && !e.defined()) continue;
    if (a.defined() != e.defined()) return incomparable(name, "defined on one side only");
    if (a.sizes() != e.sizes()) return incomparable(name, "shapes differ");
    const at::Tensor& b = bound[i].second;
    if (!b.defined() || b.sizes() != a.sizes()) {
      throw std::invalid_argument("compare_within: no bound of the right shape for '" + name + "'");
    }
    if (a.numel() == 0) continue;
    at::Tensor d = (a.detach().to(torch::kCPU, torch::kDouble) - e.detach().to(torch::kCPU, torch::kDouble)).abs().flatten();
    at::Tensor bd = b.detach().to(torch::kCPU, torch::kDouble).flatten();
    // 0 where equal (also where the bound is 0), infinity for a difference the bound does not allow
    // at all or a non-finite value on either side.
    at::Tensor ratio = torch::where(d == 0, torch::zeros_like(d), d / bd);
    ratio = torch::where(torch::isnan(ratio), torch::full_like(ratio, inf), ratio);
    const int64_t at_worst = ratio.argmax().item<int64_t>();
    const double r = ratio[at_worst].item<double>();
    const double dmax = torch::where(torch::isnan(d), torch::full_like(d, inf), d).max().item<double>();
    worst.max_abs_diff = std::max(worst.max_abs_diff, dmax);
    if (worst.name.empty() || r > worst.ratio) {
      worst.name = name;
      worst.index = at_worst;
      worst.diff = d[at_worst].item<double>();
      worst.bound = bd[at_worst].item<double>();
      worst.ratio = r;
    }
  }
  return worst;
}

std::string describe(const Tolerance& t) {
  if (!t.detail.empty()) return "'" + t.name + "': " + t.detail;
  return "'" + t.name + "'[" + std::to_string(t.index) + "]: |diff| " + fmt::sig(t.diff, 3) + ", bound " +
         fmt::sig(t.bound, 3) + " (" + fmt::sig(t.ratio, 3) + " of the bound)";
}

}  // namespace tc
