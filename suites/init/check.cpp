// init: parameters follow the recipe's declared initialisation, reproducibly under a seed.
// Bounds: 5 standard errors for the sample mean, standard deviation and excess kurtosis (a false
// alarm per statistic has probability below 1e-6 under the declared distribution); constants exact;
// uniform samples inside their interval.
#include <cmath>

#include <torch/torch.h>

#include "suites/support/kit.h"
#include "suites/support/tensor_compare.h"

namespace tc {
namespace {

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

// Problems of one parameter against its declared distribution; empty when it conforms.
std::string judge(const InitSpec& spec, const at::Tensor& t) {
  const double n = static_cast<double>(t.numel());
  const Moments mo = moments(t);
  const double k = 5.0;
  auto f = [](double v) { return format_double(v, 4); };
  switch (spec.kind) {
    case InitSpec::Kind::kConstant:
      if (mo.min != spec.a || mo.max != spec.a) {
        return "declared constant " + f(spec.a) + ", found values in [" + f(mo.min) + ", " + f(mo.max) + "]";
      }
      return "";
    case InitSpec::Kind::kNormal: {
      const double sigma = spec.b;
      if (std::abs(mo.mean - spec.a) > k * sigma / std::sqrt(n)) {
        return "declared N(" + f(spec.a) + ", " + f(sigma) + "), sample mean " + f(mo.mean);
      }
      if (std::abs(mo.std - sigma) > k * sigma / std::sqrt(2 * n)) {
        return "declared N(" + f(spec.a) + ", " + f(sigma) + "), sample std " + f(mo.std);
      }
      if (std::abs(mo.excess_kurtosis) > k * std::sqrt(24.0 / n)) {
        return "declared N(" + f(spec.a) + ", " + f(sigma) + "), excess kurtosis " + f(mo.excess_kurtosis) +
               " (a normal has 0; a uniform -1.2)";
      }
      return "";
    }
    case InitSpec::Kind::kUniform: {
      const double lo = spec.a, hi = spec.b, sd = (hi - lo) / std::sqrt(12.0);
      if (mo.min < lo || mo.max > hi) {
        return "declared U(" + f(lo) + ", " + f(hi) + "), values in [" + f(mo.min) + ", " + f(mo.max) + "]";
      }
      if (std::abs(mo.mean - (lo + hi) / 2) > k * sd / std::sqrt(n) ||
          std::abs(mo.std - sd) > k * sd / std::sqrt(n)) {
        return "declared U(" + f(lo) + ", " + f(hi) + "), sample mean " + f(mo.mean) + " std " + f(mo.std);
      }
      return "";
    }
  }
  return "unknown distribution kind";
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
  for (const auto& [name, t] : params) {
    auto it = std::find_if(specs.begin(), specs.end(), [&](const InitSpec& s) { return s.parameter == name; });
    if (it == specs.end()) {
      problems.push_back("'" + name + "' has no declared initialisation");
      continue;
    }
    const Moments mo = moments(t);
    per[name] = {{"mean", mo.mean}, {"std", mo.std}, {"excess_kurtosis", mo.excess_kurtosis}};
    std::string p = judge(*it, t);
    if (!p.empty()) problems.push_back("'" + name + "': " + p);
  }
  out.metrics() = {{"parameters", per}, {"sigmas", 5}};
  if (!problems.empty()) {
    out.broken("declared_init", "initial parameters against the declared initialisation: " + joined(problems));
  } else {
    out.held("declared_init", std::to_string(params.size()) +
                                  " parameters follow their declared initialisation (mean, std, kurtosis "
                                  "within 5 standard errors; constants exact)");
  }
}

// The same seed twice gives the same weights; the next seed other weights.
void init_reproducible(const CheckContext& ctx, const NamedTensors& pa, Findings& out) {
  std::vector<std::string> problems;
  std::unique_ptr<Run> b = ctx.make_run();
  b->setup(run_options(ctx, ctx.seed));
  if (auto d = first_tensor_difference(pa, snapshot(b->parameters()))) {
    problems.push_back("two initialisations with seed " + std::to_string(ctx.seed) + " differ at '" + d->name + "'");
  }
  std::unique_ptr<Run> c = ctx.make_run();
  c->setup(run_options(ctx, ctx.seed + 1));
  if (!first_tensor_difference(pa, snapshot(c->parameters()))) {
    problems.push_back("seeds " + std::to_string(ctx.seed) + " and " + std::to_string(ctx.seed + 1) +
                       " give identical initial weights");
  }
  if (!problems.empty()) {
    out.broken("init_reproducible", joined(problems));
  } else {
    out.held("init_reproducible", "initialisation reproducible under the seed (seed " + std::to_string(ctx.seed) +
                                      " twice: equal; seed " + std::to_string(ctx.seed + 1) + ": other weights)");
  }
}

CheckResult check_init(const CheckContext& ctx) {
  std::unique_ptr<Run> a = ctx.make_run();
  a->setup(run_options(ctx, ctx.seed));
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
