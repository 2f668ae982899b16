// compare: whether the two environments computed the same numbers, from each cell's training
// fingerprint (suites/support/fingerprint.h; docs/benchmarks-and-gating.md, "numerics").
#include "harness/compare.h"
#include "harness/util/text_format.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

namespace tc {

using nlohmann::json;

namespace {
using CellKey = std::tuple<std::string, std::string, std::string>;  // check, recipe, device
}  // namespace

// --- numerics ------------------------------------------------------------------------------------

const char* to_string(NumericsGate g) {
  switch (g) {
    case NumericsGate::kOff: return "off";
    case NumericsGate::kTolerant: return "tolerant";
    case NumericsGate::kStrict: return "strict";
  }
  return "?";
}

NumericsGate numerics_gate_from_string(const std::string& s) {
  if (s == "off") return NumericsGate::kOff;
  if (s == "tolerant") return NumericsGate::kTolerant;
  if (s == "strict") return NumericsGate::kStrict;
  throw std::invalid_argument("--numerics '" + s + "' is not one of off (reported, not gating), tolerant "
                              "(a diverged cell fails), strict (any cell not bitwise identical fails)");
}

const char* to_string(NumericsStatus s) {
  switch (s) {
    case NumericsStatus::kIdentical: return "identical";
    case NumericsStatus::kDrifted: return "drifted";
    case NumericsStatus::kDiverged: return "diverged";
    case NumericsStatus::kIncomparable: return "incomparable";
    case NumericsStatus::kNotRecorded: return "not_recorded";
    case NumericsStatus::kMissing: return "missing";
  }
  return "?";
}

int Comparison::numerics_failures() const {
  return static_cast<int>(std::count_if(numerics.begin(), numerics.end(), [this](const NumericsChange& n) {
    return numerics_fails(n, options.numerics);
  }));
}

bool numerics_fails(const NumericsChange& n, NumericsGate gate) {
  if (n.variant) return false;
  switch (gate) {
    case NumericsGate::kOff: return false;
    case NumericsGate::kTolerant: return n.status == NumericsStatus::kDiverged;
    case NumericsGate::kStrict:
      return n.status == NumericsStatus::kDrifted || n.status == NumericsStatus::kDiverged ||
             n.status == NumericsStatus::kIncomparable;
  }
  return false;
}

namespace {

constexpr const char* kFingerprintFormat = "torchconform.fingerprint/1";  // suites/support/fingerprint.h

struct Print {
  std::vector<double> losses;
  std::string sha256;
  int64_t tensors = 0, elements = 0, non_finite = 0;
  double l2_norm = 0.0, max_abs = 0.0;
};

// A fingerprint as written by suites/support/fingerprint.cpp; throws std::invalid_argument (with the
// field) or nlohmann's errors on anything else.
Print read_print(const json& f) {
  if (!f.is_object()) throw std::invalid_argument("not an object");
  const std::string format = f.at("format").get<std::string>();
  if (format != kFingerprintFormat) throw std::invalid_argument("format '" + format + "'");
  Print p;
  for (const json& h : f.at("loss_hex")) {
    const std::string text = h.get<std::string>();
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size()) throw std::invalid_argument("loss '" + text + "'");
    p.losses.push_back(v);
  }
  const json& params = f.at("params");
  p.sha256 = params.at("sha256").get<std::string>();
  p.tensors = params.at("tensors").get<int64_t>();
  p.elements = params.at("elements").get<int64_t>();
  p.non_finite = params.value("non_finite", int64_t{0});
  p.l2_norm = params.at("l2_norm").get<double>();
  p.max_abs = params.at("max_abs").get<double>();
  return p;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// |a - b| / max(|a|, |b|): 0 when equal (both NaN counts as equal here: bitwise identity is decided
// apart), infinity when only one is finite.
double relative_difference(double a, double b) {
  if (a == b || (std::isnan(a) && std::isnan(b))) return 0.0;
  if (!std::isfinite(a) || !std::isfinite(b)) return std::numeric_limits<double>::infinity();
  return std::fabs(a - b) / std::max(std::fabs(a), std::fabs(b));
}

// Within kRoundingUlps units in the last place of the larger magnitude, in float32 when both values
// are float32 numbers (a float32 loss read out as a double), else in float64.
bool within_rounding(double a, double b) {
  if (a == b || (std::isnan(a) && std::isnan(b))) return true;
  if (!std::isfinite(a) || !std::isfinite(b)) return false;
  const double m = std::max(std::fabs(a), std::fabs(b));
  const bool f32 = static_cast<double>(static_cast<float>(a)) == a && static_cast<double>(static_cast<float>(b)) == b;
  const double ulp = f32 ? static_cast<double>(std::nextafter(static_cast<float>(m), INFINITY) - static_cast<float>(m))
                         : std::nextafter(m, INFINITY) - m;
  return std::fabs(a - b) <= kRoundingUlps * ulp;
}

}  // namespace

NumericsChange compare_fingerprints(const json& base, const json& next, double tolerance) {
  NumericsChange n;
  n.tolerance = tolerance;
  Print a, b;
  for (auto [print, side, name] : {std::tuple<Print*, const json*, const char*>{&a, &base, "base"},
                                   std::tuple<Print*, const json*, const char*>{&b, &next, "new"}}) {
    try {
      *print = read_print(*side);
    } catch (const std::exception& e) {
      n.status = NumericsStatus::kIncomparable;
      n.detail = std::string("the fingerprint in ") + name + " is not one this compare reads (" + e.what() + ")";
      return n;
    }
  }
  n.params_sha256_base = a.sha256;
  n.params_sha256_next = b.sha256;
  n.steps = std::min(a.losses.size(), b.losses.size());
  if (a.losses.size() != b.losses.size() || a.tensors != b.tensors || a.elements != b.elements) {
    n.status = NumericsStatus::kIncomparable;
    n.detail = "not the same run: " + std::to_string(a.losses.size()) + " steps and " + std::to_string(a.elements) +
               " parameters in base, " + std::to_string(b.losses.size()) + " steps and " +
               std::to_string(b.elements) + " in new (another --quick, recipe or model?)";
    return n;
  }
  n.losses_bitwise_equal = true;
  for (size_t i = 0; i < n.steps; ++i) n.losses_bitwise_equal = n.losses_bitwise_equal && same_bits(a.losses[i], b.losses[i]);
  n.params_bitwise_equal = a.sha256 == b.sha256;
  if (n.losses_bitwise_equal && n.params_bitwise_equal) {
    n.status = NumericsStatus::kIdentical;
    return n;
  }
  auto consider = [&](double r, const std::string& where) {
    if (r > n.max_rel_diff || n.max_rel_where.empty()) {
      n.max_rel_diff = r;
      n.max_rel_where = where;
    }
  };
  for (size_t i = 0; i < n.steps; ++i) {
    const double x = a.losses[i], y = b.losses[i];
    const double r = relative_difference(x, y);
    consider(r, "step " + std::to_string(i));
    if (!n.first_difference && !same_bits(x, y)) {
      n.first_difference = i;
      n.first_base = x;
      n.first_next = y;
    }
    if (!n.first_beyond_rounding && !within_rounding(x, y)) {
      n.first_beyond_rounding = i;
      n.rounding_base = x;
      n.rounding_next = y;
    }
    if (!n.first_beyond_tolerance && !(r <= tolerance)) {
      n.first_beyond_tolerance = i;
      n.diverged_base = x;
      n.diverged_next = y;
    }
  }
  const double r_l2 = relative_difference(a.l2_norm, b.l2_norm);
  const double r_max = relative_difference(a.max_abs, b.max_abs);
  consider(r_l2, "params.l2_norm");
  consider(r_max, "params.max_abs");
  if (n.first_beyond_tolerance) {
    n.status = NumericsStatus::kDiverged;
  } else if (a.non_finite != b.non_finite) {
    n.status = NumericsStatus::kDiverged;
    n.detail = "the final parameters hold " + std::to_string(a.non_finite) + " non-finite values in base, " +
               std::to_string(b.non_finite) + " in new";
  } else if (!(r_l2 <= tolerance) || !(r_max <= tolerance)) {
    n.status = NumericsStatus::kDiverged;
    n.detail = "the final parameters: L2 norm " + fmt::num9(a.l2_norm) + " vs " + fmt::num9(b.l2_norm) +
               ", max |x| " + fmt::num9(a.max_abs) + " vs " + fmt::num9(b.max_abs) + " (every loss within the tolerance)";
  } else {
    n.status = NumericsStatus::kDrifted;
  }
  return n;
}

std::vector<NumericsChange> diff_numerics(const std::vector<Cell>& base, const std::vector<Cell>& next,
                                          double tolerance) {
  auto print_of = [](const Cell& c) -> const json* {
    return c.metrics.is_object() && c.metrics.contains("fingerprint") ? &c.metrics["fingerprint"] : nullptr;
  };
  std::map<CellKey, const Cell*> a;
  for (const Cell& c : base) a[{c.check, c.recipe, c.device}] = &c;
  std::set<CellKey> seen;
  std::vector<NumericsChange> out;
  auto row = [&](const Cell& c) {
    NumericsChange n;
    n.check = c.check;
    n.recipe = c.recipe;
    n.device = c.device;
    n.tolerance = tolerance;
    return n;
  };
  for (const Cell& c : next) {
    const CellKey k{c.check, c.recipe, c.device};
    seen.insert(k);
    auto it = a.find(k);
    const json* pn = print_of(c);
    const json* pb = it == a.end() ? nullptr : print_of(*it->second);
    if (pn == nullptr && pb == nullptr) continue;
    NumericsChange n = row(c);
    if (pn && pb) {
      n = compare_fingerprints(*pb, *pn, tolerance);
      n.check = c.check;
      n.recipe = c.recipe;
      n.device = c.device;
    } else {
      n.status = it == a.end() ? NumericsStatus::kMissing : NumericsStatus::kNotRecorded;
      n.absent_from = pn ? "base" : "new";
    }
    n.variant = c.role == Role::kVariant || (it != a.end() && it->second->role == Role::kVariant);
    out.push_back(std::move(n));
  }
  for (const Cell& c : base) {
    if (seen.count({c.check, c.recipe, c.device}) || print_of(c) == nullptr) continue;
    NumericsChange n = row(c);
    n.status = NumericsStatus::kMissing;
    n.absent_from = "new";
    n.variant = c.role == Role::kVariant;
    out.push_back(std::move(n));
  }
  return out;
}

}  // namespace tc
