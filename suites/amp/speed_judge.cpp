#include "suites/amp/speed_judge.h"

#include <algorithm>
#include <stdexcept>

#include "harness/util/text_format.h"

namespace tc::amp {
namespace {

struct Field {
  const char* key;
  std::vector<double> SpeedRounds::*member;
};
constexpr Field kFields[] = {{"ref_fp32_s", &SpeedRounds::ref_fp32},       {"ref_amp_s", &SpeedRounds::ref_amp},
                             {"recipe_fp32_s", &SpeedRounds::recipe_fp32}, {"recipe_amp_s", &SpeedRounds::recipe_amp},
                             {"gemm_fp32_s", &SpeedRounds::gemm_fp32},     {"gemm_amp_s", &SpeedRounds::gemm_amp}};

template <typename F>
std::vector<double> per_round(const SpeedRounds& r, F f) {
  std::vector<double> v;
  for (size_t i = 0; i < r.size(); ++i) v.push_back(f(i));
  return v;
}

}  // namespace

nlohmann::json to_json(const SpeedRounds& r) {
  nlohmann::json j = nlohmann::json::object();
  for (const Field& f : kFields) j[f.key] = r.*f.member;
  return j;
}

SpeedRounds speed_rounds_from_json(const nlohmann::json& j) {
  SpeedRounds r;
  for (const Field& f : kFields) {
    if (!j.is_object() || !j.contains(f.key) || !j[f.key].is_array()) {
      throw std::runtime_error(std::string("speed rounds: no array '") + f.key + "'");
    }
    for (const nlohmann::json& x : j[f.key]) {
      if (!x.is_number() || !(x.get<double>() > 0)) {
        throw std::runtime_error(std::string("speed rounds: '") + f.key + "' holds " + x.dump() +
                                 ", not a positive number of seconds");
      }
      (r.*f.member).push_back(x.get<double>());
    }
  }
  for (const Field& f : kFields) {
    if ((r.*f.member).size() != r.size()) {
      throw std::runtime_error(std::string("speed rounds: '") + f.key + "' has " +
                               std::to_string((r.*f.member).size()) + " rounds, recipe_amp_s " +
                               std::to_string(r.size()));
    }
  }
  return r;
}

const char* to_string(Ceiling c) {
  switch (c) {
    case Ceiling::kGain: return "gain";
    case Ceiling::kNoGain: return "no gain";
    case Ceiling::kUndecided: return "undecided";
  }
  return "?";
}

bool SpeedVerdict::decided() const {
  if (procedure_v == stats::BarVerdict::kUndecided) return false;
  if (ceiling_says == Ceiling::kNoGain || reference_says == Ceiling::kNoGain) return true;
  return throughput_judged() && throughput_v != stats::BarVerdict::kUndecided;
}

SpeedVerdict judge_speed(const SpeedRounds& r) {
  SpeedVerdict v;
  auto share = [&](size_t i) { return std::min(1.0, r.gemm_fp32[i] / r.recipe_fp32[i]); };
  auto ceiling = [&](size_t i) { return r.gemm_fp32[i] / r.gemm_amp[i]; };
  auto attainable = [&](size_t i) { return 1.0 / ((1.0 - share(i)) + share(i) / ceiling(i)); };
  auto speedup = [&](size_t i) { return r.recipe_fp32[i] / r.recipe_amp[i]; };
  auto reference = [&](size_t i) { return r.ref_fp32[i] / r.ref_amp[i]; };
  auto reference_saving = [&](size_t i) { return (r.ref_fp32[i] - r.ref_amp[i]) / r.recipe_fp32[i]; };
  auto bar = [&](size_t i) {
    const double need = std::min(kGainShare * share(i) * (1.0 - 1.0 / ceiling(i)), kReferenceShare * reference_saving(i));
    return 1.0 / (1.0 - need);
  };
  v.ceiling = stats::median_interval(per_round(r, ceiling));
  v.matmul_share = stats::median_interval(per_round(r, share));
  v.attainable = stats::median_interval(per_round(r, attainable));
  v.speedup = stats::median_interval(per_round(r, speedup));
  v.reference_speedup = stats::median_interval(per_round(r, reference));
  v.procedure = stats::median_interval(per_round(r, [&](size_t i) { return speedup(i) / reference(i); }));
  v.reference_saving = stats::median_interval(per_round(r, reference_saving));
  v.bar = stats::median_interval(per_round(r, bar));
  v.against_bar = stats::median_interval(per_round(r, [&](size_t i) { return speedup(i) / bar(i); }));
  v.procedure_v = stats::judge_at_least(v.procedure, kProcedureBar);
  if (v.attainable.has_interval && v.attainable.hi < kMinAttainable) {
    v.ceiling_says = Ceiling::kNoGain;
  } else if (v.attainable.has_interval && v.attainable.lo >= kMinAttainable) {
    v.ceiling_says = Ceiling::kGain;
  }
  if (v.reference_speedup.has_interval && v.reference_speedup.hi <= 1.0) {
    v.reference_says = Ceiling::kNoGain;
  } else if (v.reference_speedup.has_interval && v.reference_speedup.lo > 1.0) {
    v.reference_says = Ceiling::kGain;
  }
  if (v.throughput_judged()) v.throughput_v = stats::judge_at_least(v.against_bar, 1.0);
  return v;
}

std::string describe(const stats::MedianInterval& m) {
  std::string s = fmt::sig(m.median, 3) + "x (median of " + std::to_string(m.n) + " rounds";
  if (m.has_interval) {
    s += ", " + fmt::sig(100 * m.coverage, 3) + "% interval " + fmt::sig(m.lo, 3) + ".." + fmt::sig(m.hi, 3);
  }
  return s + ")";
}

}  // namespace tc::amp
