// init: parameters follow the recipe's declared initialisation, reproducibly under a seed.
// Bounds: 5 standard errors for the sample mean, standard deviation and (normal) excess kurtosis, each
// standard error that of the declared distribution (a false alarm per statistic has probability below
// 1e-6 under it, the statistics being close to normal for the sizes here); constants exact; uniform
// samples inside their interval. metrics.parameters gives every statistic's z-score (its deviation in
// standard errors), metrics.max_abs_z the largest.
#include <cmath>

#include <torch/torch.h>

#include "harness/util/text_format.h"
#include "suites/support/kit.h"
#include "suites/support/tensor_compare.h"

namespace tc {
namespace {

constexpr double kSigmas = 5.0;

struct Moments {
  double mean, std, excess_kurtosis, min, max;
};

Moments moments(const at::Tensor& t) {
  at::Tensor x = t.detach().cpu().to(torch::kDouble).flatten();
  const double mean = x.mean().item<double>();
  at::Tensor c = x - mean;
  const double var = c.pow(2).mean().item<double>();
  const double m4 = c.pow(4).mean().item<double>();
  return {mean, std::sqrt(var), var > 0 ? m4 / (var * var) - 3.0 : 0.0, x.min().item<double>(),
          x.max().item<double>()};
}

// The standard error of the sample standard deviation of n draws from a distribution with standard
// deviation sigma and kurtosis kappa = E[(x - mu)^4] / sigma^4 (not excess; normal 3, uniform 9/5).
// The sample variance s^2 has variance (mu4 - sigma^4) / n = sigma^4 (kappa - 1) / n (to first order
// in 1/n); by the delta method s = sqrt(s^2) has variance Var(s^2) / (4 sigma^2), so
//   se(s) = sigma * sqrt((kappa - 1) / (4 n)):  normal sigma / sqrt(2 n), uniform sigma / sqrt(5 n).
// (Dividing by n rather than n - 1 biases s by about -sigma / (2 n), i.e. 1 / sqrt(2 n) standard errors
// for a normal: under 0.1 for the n >= 64 of any weight here.)
double std_error_of_std(double sigma, double kappa, double n) { return sigma * std::sqrt((kappa - 1.0) / (4.0 * n)); }

// Mean, standard deviation and kurtosis (not excess) of N(mu, sigma^2) truncated to [low, high], by
// Simpson's rule on the standard normal density over [alpha, beta] (4096 intervals: the moments to
// about 1e-12 relative, far below the sampling errors judged against them).
struct TruncatedMoments {
  double mean, sd, kurtosis;
};
TruncatedMoments truncated_normal_moments(double mu, double sigma, double low, double high) {
  const double alpha = (low - mu) / sigma, beta = (high - mu) / sigma;
  const int n = 4096;
  const double h = (beta - alpha) / n;
  double m[5] = {0, 0, 0, 0, 0};  // integrals of z^k phi(z), k = 0..4
  for (int i = 0; i <= n; ++i) {
    const double z = alpha + i * h;
    const double w = (i == 0 || i == n) ? 1.0 : (i % 2 ? 4.0 : 2.0);
    const double phi = std::exp(-0.5 * z * z);  // the constant cancels in the ratios below
    double zk = 1.0;
    for (double& mk : m) {
      mk += w * zk * phi;
      zk *= z;
    }
  }
  const double e1 = m[1] / m[0], e2 = m[2] / m[0], e3 = m[3] / m[0], e4 = m[4] / m[0];
  const double var = e2 - e1 * e1;
  const double c4 = e4 - 4 * e1 * e3 + 6 * e1 * e1 * e2 - 3 * e1 * e1 * e1 * e1;
  return {mu + sigma * e1, sigma * std::sqrt(var), c4 / (var * var)};
}

// A distribution on [lo, hi]: every sample inside, then mean and standard deviation within kSigmas
// standard errors. The problem ("" when none), after `decl`.
std::string bounded_problem(const std::string& decl, double lo, double hi, const Moments& mo, double z_mean,
                            double z_std) {
  auto f = [](double v) { return fmt::sig(v, 4); };
  auto zs = [&](double z) { return " (z = " + fmt::sig(z, 3) + ", bound " + fmt::sig(kSigmas, 1) + ")"; };
  if (mo.min < lo || mo.max > hi) return decl + "values in [" + f(mo.min) + ", " + f(mo.max) + "]";
  if (std::abs(z_mean) > kSigmas) return decl + "sample mean " + f(mo.mean) + zs(z_mean);
  if (std::abs(z_std) > kSigmas) return decl + "sample std " + f(mo.std) + zs(z_std);
  return "";
}

// One parameter judged against its declared distribution: the z-score of each statistic and the
// problems (empty when it conforms).
struct Judged {
  nlohmann::json z = nlohmann::json::object();  // statistic -> deviation / standard error
  std::string problem;
};

Judged compare_to_spec(const InitSpec& spec, const at::Tensor& t) {
  const double n = static_cast<double>(t.numel());
  const Moments mo = moments(t);
  auto f = [](double v) { return fmt::sig(v, 4); };
  auto zs = [&](double z) { return " (z = " + fmt::sig(z, 3) + ", bound " + fmt::sig(kSigmas, 1) + ")"; };
  Judged j;
  switch (spec.kind) {
    case InitSpec::Kind::kConstant:
      if (mo.min != spec.a || mo.max != spec.a) {
        j.problem = "declared constant " + f(spec.a) + ", found values in [" + f(mo.min) + ", " + f(mo.max) + "]";
      }
      return j;
    case InitSpec::Kind::kNormal: {
      const double sigma = spec.b;
      const double z_mean = (mo.mean - spec.a) / (sigma / std::sqrt(n));
      const double z_std = (mo.std - sigma) / std_error_of_std(sigma, 3.0, n);
      const double z_kurt = mo.excess_kurtosis / std::sqrt(24.0 / n);  // se of excess kurtosis of a normal
      j.z = {{"mean", z_mean}, {"std", z_std}, {"excess_kurtosis", z_kurt}};
      const std::string decl = "declared N(" + f(spec.a) + ", " + f(sigma) + "), ";
      if (std::abs(z_mean) > kSigmas) {
        j.problem = decl + "sample mean " + f(mo.mean) + zs(z_mean);
      } else if (std::abs(z_std) > kSigmas) {
        j.problem = decl + "sample std " + f(mo.std) + zs(z_std);
      } else if (std::abs(z_kurt) > kSigmas) {
        j.problem = decl + "excess kurtosis " + f(mo.excess_kurtosis) + zs(z_kurt) + " (a normal has 0; a uniform -1.2)";
      }
      return j;
    }
    case InitSpec::Kind::kTruncatedNormal: {
      // Inside the cutoffs; mean and standard deviation those of the truncated distribution, each
      // within 5 of its standard errors (the standard deviation's from the truncated kurtosis).
      const TruncatedMoments tm = truncated_normal_moments(spec.a, spec.b, spec.low, spec.high);
      const double z_mean = (mo.mean - tm.mean) / (tm.sd / std::sqrt(n));
      const double z_std = (mo.std - tm.sd) / std_error_of_std(tm.sd, tm.kurtosis, n);
      j.z = {{"mean", z_mean}, {"std", z_std}};
      j.problem = bounded_problem("declared N(" + f(spec.a) + ", " + f(spec.b) + ") truncated to [" + f(spec.low) +
                                      ", " + f(spec.high) + "] (mean " + f(tm.mean) + ", std " + f(tm.sd) + "), ",
                                  spec.low, spec.high, mo, z_mean, z_std);
      return j;
    }
    case InitSpec::Kind::kUniform: {
      const double lo = spec.a, hi = spec.b, sd = (hi - lo) / std::sqrt(12.0);
      const double z_mean = (mo.mean - (lo + hi) / 2) / (sd / std::sqrt(n));
      const double z_std = (mo.std - sd) / std_error_of_std(sd, 9.0 / 5.0, n);
      j.z = {{"mean", z_mean}, {"std", z_std}};
      j.problem = bounded_problem("declared U(" + f(lo) + ", " + f(hi) + "), ", lo, hi, mo, z_mean, z_std);
      return j;
    }
  }
  j.problem = "unknown distribution kind";
  return j;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "; " : "") + v[i];
  return s;
}

// Every parameter against the distribution the recipe declares for it.
void declared_init(const std::vector<InitSpec>& specs, const NamedTensors& params, Findings& out) {
  std::vector<std::string> problems;
  nlohmann::json per = nlohmann::json::object();
  double max_abs_z = 0.0;
  std::string max_at = "none (constants only)";
  for (const auto& [name, t] : params) {
    auto it = std::find_if(specs.begin(), specs.end(), [&](const InitSpec& s) { return s.parameter == name; });
    if (it == specs.end()) {
      problems.push_back("'" + name + "' has no declared initialisation");
      continue;
    }
    const Moments mo = moments(t);
    const Judged j = compare_to_spec(*it, t);
    per[name] = {{"mean", mo.mean}, {"std", mo.std}, {"excess_kurtosis", mo.excess_kurtosis}, {"z", j.z}};
    for (auto z = j.z.begin(); z != j.z.end(); ++z) {
      if (std::abs(z.value().get<double>()) > max_abs_z) {
        max_abs_z = std::abs(z.value().get<double>());
        max_at = "'" + name + "' " + z.key();
      }
    }
    if (!j.problem.empty()) problems.push_back("'" + name + "': " + j.problem);
  }
  out.metrics() = {{"parameters", per}, {"sigmas", kSigmas}, {"max_abs_z", max_abs_z}, {"max_abs_z_at", max_at}};
  if (!problems.empty()) {
    out.broken("declared_init", "initial parameters against the declared initialisation: " + joined(problems));
  } else {
    out.held("declared_init", std::to_string(params.size()) +
                                  " parameters follow their declared initialisation (mean, std, kurtosis "
                                  "within 5 standard errors, the largest |z| " + fmt::sig(max_abs_z, 3) +
                                  " at " + max_at + "; constants exact)");
  }
}

// The same seed twice gives the same weights; the next seed other weights.
void init_reproducible(const CheckContext& ctx, const NamedTensors& pa, Findings& out) {
  std::vector<std::string> problems;
  std::unique_ptr<Run> b = fresh_run(ctx, run_options(ctx, ctx.seed));
  if (auto d = first_tensor_difference(pa, snapshot(b->parameters()))) {
    problems.push_back("two initialisations with seed " + std::to_string(ctx.seed) + " differ at '" + d->name + "'");
  }
  std::unique_ptr<Run> c = fresh_run(ctx, run_options(ctx, ctx.seed + 1));
  if (!first_tensor_difference(pa, snapshot(c->parameters()))) {
    // Appended piece by piece: `"seeds " + std::to_string(...)` (operator+ inserting into the
    // temporary) makes GCC 12 at -O2 warn -Wstringop-overflow with a bound above PTRDIFF_MAX, a
    // false positive.
    std::string same = "seeds ";
    same += std::to_string(ctx.seed);
    same += " and ";
    same += std::to_string(ctx.seed + 1);
    same += " give identical initial weights";
    problems.push_back(same);
  }
  if (!problems.empty()) {
    out.broken("init_reproducible", joined(problems));
  } else {
    out.held("init_reproducible", "initialisation reproducible under the seed (seed " + std::to_string(ctx.seed) +
                                      " twice: equal; seed " + std::to_string(ctx.seed + 1) + ": other weights)");
  }
}

CheckResult check_init(const CheckContext& ctx) {
  std::unique_ptr<Run> a = fresh_run(ctx, run_options(ctx, ctx.seed));
  const std::vector<InitSpec> specs = a->declared_init();
  const NamedTensors pa = snapshot(a->parameters());
  Findings f;
  declared_init(specs, pa, f);
  init_reproducible(ctx, pa, f);
  return f.result();
}

}  // namespace
}  // namespace tc

namespace tc {
TC_CHECK(init,
         "weights follow the declared initialisation, reproducibly under a seed")
    ->Promise("declared_init", "weights follow the declared initialisation")
    ->Promise("init_reproducible", "initialisation is reproducible under a seed");
}  // namespace tc
