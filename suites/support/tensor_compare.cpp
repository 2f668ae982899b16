#include "suites/support/tensor_compare.h"

#include "harness/util/text_format.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <torch/torch.h>

namespace tc {

RunOptions run_options(const CheckContext& ctx, int64_t seed) {
  RunOptions o;
  o.device = c10::Device(ctx.device);
  o.seed = seed;
  o.deterministic = true;
  o.quick = ctx.quick;
  return o;
}

NamedTensors snapshot(const NamedTensors& tensors) {
  NamedTensors out;
  out.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    out.emplace_back(name, t.defined() ? t.detach().to(torch::kCPU).clone() : at::Tensor());
  }
  return out;
}

std::optional<size_t> first_difference(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    // Bitwise: NaN == NaN counts as equal only if both are NaN with the same payload.
    if (std::memcmp(&a[i], &b[i], sizeof(double)) != 0) return i;
  }
  if (a.size() != b.size()) return n;
  return std::nullopt;
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined() || a.sizes() != b.sizes()) {
    return std::numeric_limits<double>::infinity();
  }
  if (a.numel() == 0) return 0.0;
  return (a.to(torch::kCPU, torch::kDouble) - b.to(torch::kCPU, torch::kDouble)).abs().max().item<double>();
}

std::optional<TensorDifference> first_tensor_difference(const NamedTensors& a, const NamedTensors& b) {
  const double inf = std::numeric_limits<double>::infinity();
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const auto& [na, ta] = a[i];
    const auto& [nb, tb] = b[i];
    if (na != nb) return TensorDifference{na, inf, "tensor names differ: '" + na + "' vs '" + nb + "'"};
    if (ta.defined() != tb.defined()) {
      return TensorDifference{na, inf, std::string("defined in one run only")};
    }
    if (!ta.defined()) continue;
    if (ta.sizes() != tb.sizes() || ta.scalar_type() != tb.scalar_type()) {
      return TensorDifference{na, inf, "shape or dtype differs"};
    }
    at::Tensor ca = ta.to(torch::kCPU).contiguous(), cb = tb.to(torch::kCPU).contiguous();
    const size_t bytes = static_cast<size_t>(ca.numel()) * ca.element_size();
    if (std::memcmp(ca.data_ptr(), cb.data_ptr(), bytes) != 0) {
      return TensorDifference{na, max_abs_diff(ca, cb), ""};
    }
  }
  if (a.size() != b.size()) {
    const std::string& name = a.size() > b.size() ? a[n].first : b[n].first;
    return TensorDifference{name, inf, "present in one run only"};
  }
  return std::nullopt;
}

std::string describe_curve_difference(const std::vector<double>& a, const std::vector<double>& b,
                                      size_t i) {
  if (i >= a.size() || i >= b.size()) {
    return "curves have different lengths (" + std::to_string(a.size()) + " vs " +
           std::to_string(b.size()) + ")";
  }
  return "step " + std::to_string(i) + ": loss " + fmt::sig(a[i], 9) + " vs " +
         fmt::sig(b[i], 9) + " (|diff| " + fmt::sig(std::abs(a[i] - b[i]), 3) + ")";
}

}  // namespace tc
