#include "harness/util/statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace tc::stats {

double median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double mean(const std::vector<double>& v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double coefficient_of_variation(const std::vector<double>& v) {
  if (v.size() < 2) return 0.0;
  const double m = mean(v);
  double ss = 0.0;
  for (double x : v) ss += (x - m) * (x - m);
  const double sd = std::sqrt(ss / static_cast<double>(v.size() - 1));
  return m == 0.0 ? 0.0 : sd / m;
}

namespace {

// P(U >= k) under the null for sample sizes m, n, from the generating function of the number of
// arrangements with statistic u: prod_{i=1..m} (1 - q^{n+i}) / (1 - q^i), normalised by C(m+n, m).
double exact_sf(int64_t k, int m, int n) {
  const int64_t size = static_cast<int64_t>(m) * n + 1;
  std::vector<double> c(static_cast<size_t>(size), 0.0);
  c[0] = 1.0;
  for (int i = 1; i <= m; ++i) {
    // multiply by (1 - q^{n+i})
    for (int64_t u = size - 1; u >= n + i; --u) c[u] -= c[u - (n + i)];
    // divide by (1 - q^i): running sum with stride i
    for (int64_t u = i; u < size; ++u) c[u] += c[u - i];
  }
  double total = 0.0, tail = 0.0;
  for (int64_t u = 0; u < size; ++u) {
    total += c[u];
    if (u >= k) tail += c[u];
  }
  return tail / total;
}

double normal_sf(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

}  // namespace

MwuResult mann_whitney_u(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.empty() || y.empty()) throw std::invalid_argument("mann_whitney_u: both samples must be non-empty");
  const int n1 = static_cast<int>(x.size()), n2 = static_cast<int>(y.size());
  const int n = n1 + n2;
  // Average ranks over the pooled sample; remember the size of every group of ties.
  std::vector<std::pair<double, int>> pooled;  // value, 0 for x / 1 for y
  pooled.reserve(static_cast<size_t>(n));
  for (double v : x) pooled.emplace_back(v, 0);
  for (double v : y) pooled.emplace_back(v, 1);
  std::sort(pooled.begin(), pooled.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  double r1 = 0.0, tie_term = 0.0;
  bool ties = false;
  for (int i = 0; i < n;) {
    int j = i;
    while (j + 1 < n && pooled[j + 1].first == pooled[i].first) ++j;
    const double t = j - i + 1;
    const double rank = 0.5 * ((i + 1) + (j + 1));
    for (int k = i; k <= j; ++k) {
      if (pooled[k].second == 0) r1 += rank;
    }
    if (t > 1) {
      ties = true;
      tie_term += t * t * t - t;
    }
    i = j + 1;
  }
  MwuResult res;
  const double u1 = r1 - n1 * (n1 + 1) / 2.0;
  const double u2 = static_cast<double>(n1) * n2 - u1;
  res.u = u1;
  const double u = std::max(u1, u2);
  const bool exact = !(n1 > 8 && n2 > 8) && !ties;
  double p;
  if (exact) {
    res.method = MwuMethod::kExact;
    p = exact_sf(static_cast<int64_t>(std::llround(u)), std::min(n1, n2), std::max(n1, n2));
  } else {
    res.method = MwuMethod::kAsymptotic;
    const double mu = n1 * static_cast<double>(n2) / 2.0;
    const double s = std::sqrt(n1 * static_cast<double>(n2) / 12.0 *
                               ((n + 1) - tie_term / (static_cast<double>(n) * (n - 1))));
    const double num = u - mu - 0.5;  // continuity correction
    // All values equal: s == 0, z = -inf and SciPy's p is sf(-inf) * 2 clipped to 1.
    const double z = s > 0 ? num / s : -std::numeric_limits<double>::infinity();
    p = normal_sf(z);
  }
  res.p = std::clamp(2.0 * p, 0.0, 1.0);
  return res;
}

double smallest_exact_p(int n1, int n2) {
  if (n1 <= 0 || n2 <= 0) return 1.0;
  // 2 / C(n1 + n2, n1), computed in floating point
  double c = 1.0;
  const int k = std::min(n1, n2);
  for (int i = 1; i <= k; ++i) c = c * (n1 + n2 - k + i) / i;
  return std::min(1.0, 2.0 / c);
}

const char* to_string(MwuMethod m) { return m == MwuMethod::kExact ? "exact" : "asymptotic"; }

}  // namespace tc::stats
