#include "harness/util/median_interval.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tc::stats {

namespace {
// P(B <= j) for B ~ Binomial(n, 1/2), summed in doubles (n stays in the hundreds here).
double binomial_half_cdf(int n, int j) {
  double term = std::ldexp(1.0, -n);  // C(n, 0) / 2^n
  double sum = 0.0;
  for (int i = 0; i <= j; ++i) {
    sum += term;
    term = term * (n - i) / (i + 1);
  }
  return sum;
}
}  // namespace

MedianInterval median_interval(std::vector<double> v, double level) {
  MedianInterval m;
  m.n = static_cast<int>(v.size());
  if (v.empty()) {
    m.median = std::numeric_limits<double>::quiet_NaN();
    return m;
  }
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  m.median = v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
  for (int k = m.n / 2; k >= 1; --k) {
    const double coverage = 1.0 - 2.0 * binomial_half_cdf(m.n, k - 1);
    if (coverage >= level) {
      m.has_interval = true;
      m.k = k;
      m.coverage = coverage;
      m.lo = v[k - 1];
      m.hi = v[m.n - k];
      break;
    }
  }
  return m;
}

BarVerdict judge_at_least(const MedianInterval& m, double bar) {
  if (!m.has_interval) return BarVerdict::kUndecided;
  if (m.lo >= bar) return BarVerdict::kPass;
  if (m.hi < bar) return BarVerdict::kFail;
  return BarVerdict::kUndecided;
}

const char* to_string(BarVerdict v) {
  switch (v) {
    case BarVerdict::kPass: return "pass";
    case BarVerdict::kFail: return "fail";
    case BarVerdict::kUndecided: return "undecided";
  }
  return "?";
}

}  // namespace tc::stats
