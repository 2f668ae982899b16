// Pure statistics over benchmark samples (no I/O, no torch): median, coefficient of variation and
// the two-sided Mann-Whitney U test as SciPy computes it.
#pragma once

#include <string>
#include <vector>

namespace tc::stats {

double median(std::vector<double> v);       // NaN for an empty sample
double mean(const std::vector<double>& v);  // NaN for an empty sample
// Sample standard deviation (n - 1) over the mean, as Google Benchmark's "cv"; 0 for n < 2.
double coefficient_of_variation(const std::vector<double>& v);

enum class MwuMethod { kExact, kAsymptotic };

struct MwuResult {
  double u = 0.0;  // U of the first sample (SciPy's `statistic`)
  double p = 1.0;  // two-sided p-value
  MwuMethod method = MwuMethod::kAsymptotic;
};

// Two-sided Mann-Whitney U test, matching scipy.stats.mannwhitneyu(x, y,
// alternative='two-sided') with its defaults (method='auto', use_continuity=True):
//   exact null distribution when there are no ties and not both samples have more than 8
//   values; otherwise the normal approximation with tie correction and continuity correction.
// Requires both samples non-empty (throws std::invalid_argument otherwise).
MwuResult mann_whitney_u(const std::vector<double>& x, const std::vector<double>& y);

// The smallest two-sided p-value the exact test can give for sample sizes n1, n2 (complete
// separation): 2 / C(n1 + n2, n1). With 2 + 2 samples it is 1/3, so no difference is ever
// significant at 0.05; 4 + 4 is the smallest balanced design that can reach it.
double smallest_exact_p(int n1, int n2);

const char* to_string(MwuMethod m);

}  // namespace tc::stats
