#include "suites/support/fingerprint.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <torch/torch.h>

#include "harness/util/sha256.h"

namespace tc {

std::string hex_float(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

namespace {

std::string shape_of(const at::Tensor& t) {
  std::string s;
  for (int64_t d : t.sizes()) {
    // Appended in two steps: `"x" + std::to_string(d)` (operator+ inserting into the temporary)
    // makes GCC 12 at -O2 warn -Wstringop-overflow with a bound above PTRDIFF_MAX, a false positive.
    if (!s.empty()) s += 'x';
    s += std::to_string(d);
  }
  return s;
}

// What one tensor adds to a digest: name, NUL, dtype, NUL, shape, NUL, bytes.
void feed(Sha256& h, const std::string& name, const at::Tensor& c) {
  h.update(name.data(), name.size() + 1);  // with its NUL
  if (!c.defined()) {
    h.update(std::string("undefined", 10));
    return;
  }
  const std::string dtype(c.dtype().name());
  h.update(dtype.data(), dtype.size() + 1);
  const std::string shape = shape_of(c);
  h.update(shape.data(), shape.size() + 1);
  h.update(c.data_ptr(), c.nbytes());
}

struct Sums {
  int64_t elements = 0, non_finite = 0;
  double sum = 0.0, sum_squares = 0.0, max_abs = 0.0;
  void add(const at::Tensor& c) {
    if (!c.defined()) return;
    // Element by element in order, in float64 (exact for float32 and lower inputs' conversion),
    // on this thread: the figures depend on the values alone.
    const at::Tensor d = c.to(torch::kDouble).contiguous();
    const double* p = d.data_ptr<double>();
    const int64_t n = d.numel();
    elements += n;
    for (int64_t i = 0; i < n; ++i) {
      const double x = p[i];
      if (!std::isfinite(x)) {
        ++non_finite;
        continue;
      }
      sum += x;
      sum_squares += x * x;
      max_abs = std::max(max_abs, std::fabs(x));
    }
  }
};

}  // namespace

std::string parameters_digest(const NamedTensors& params) {
  Sha256 all;
  for (const auto& [name, t] : params) feed(all, name, t.defined() ? t.detach().to(torch::kCPU).contiguous() : at::Tensor());
  return all.hex();
}

nlohmann::json training_fingerprint(const std::string& run, const std::vector<double>& losses, const NamedTensors& params) {
  nlohmann::json loss_hex = nlohmann::json::array();
  for (double l : losses) loss_hex.push_back(hex_float(l));

  Sha256 all;
  Sums total;
  struct One {
    std::string name, shape, sha256;
    int64_t elements = 0;
    double l2 = 0.0, max_abs = 0.0;
  };
  std::vector<One> each;
  for (const auto& [name, t] : params) {
    const at::Tensor c = t.defined() ? t.detach().to(torch::kCPU).contiguous() : at::Tensor();
    feed(all, name, c);
    total.add(c);
    Sha256 own;
    feed(own, name, c);
    Sums s;
    s.add(c);
    each.push_back({name, c.defined() ? shape_of(c) : "undefined", own.hex(), s.elements, std::sqrt(s.sum_squares),
                    s.max_abs});
  }
  // The largest tensors, ties in the recipe's order.
  std::stable_sort(each.begin(), each.end(), [](const One& a, const One& b) { return a.elements > b.elements; });
  nlohmann::json largest = nlohmann::json::array();
  for (size_t i = 0; i < each.size() && i < 3; ++i) {
    largest.push_back({{"name", each[i].name}, {"shape", each[i].shape}, {"elements", each[i].elements},
                       {"sha256", each[i].sha256}, {"l2_norm", each[i].l2}, {"max_abs", each[i].max_abs}});
  }
  return {{"format", kFingerprintFormat},
          {"run", run},
          {"steps", losses.size()},
          {"loss_hex", loss_hex},
          {"params", {{"tensors", params.size()},
                      {"elements", total.elements},
                      {"sha256", all.hex()},
                      {"sum", total.sum},
                      {"sum_squares", total.sum_squares},
                      {"l2_norm", std::sqrt(total.sum_squares)},
                      {"max_abs", total.max_abs},
                      {"non_finite", total.non_finite}}},
          {"largest", largest}};
}

}  // namespace tc
