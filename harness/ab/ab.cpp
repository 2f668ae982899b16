#include "harness/ab/ab.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <utility>

#include "harness/instructions.h"
#include "harness/util/statistics.h"

namespace tc {

const char* to_string(AbStatus s) {
  switch (s) {
    case AbStatus::kRegression: return "regression";
    case AbStatus::kImprovement: return "improvement";
    case AbStatus::kUnchanged: return "unchanged";
    case AbStatus::kInconclusive: return "inconclusive";
    case AbStatus::kBaseOnly: return "base_only";
    case AbStatus::kNewOnly: return "new_only";
    case AbStatus::kUnitChanged: return "unit_changed";
  }
  return "?";
}

int AbResult::count(AbStatus s) const {
  return static_cast<int>(
      std::count_if(benchmarks.begin(), benchmarks.end(), [s](const AbBench& b) { return b.status == s; }));
}

double round_value(const BenchmarkRecord& r, bool cpu_time, bool instructions) {
  if (instructions) {
    auto it = r.counters.find("instructions");
    return it == r.counters.end() || it->second.samples.empty() ? std::numeric_limits<double>::quiet_NaN()
                                                                : stats::median(it->second.samples);
  }
  if (cpu_time) return r.cpu_samples.empty() ? std::numeric_limits<double>::quiet_NaN() : stats::median(r.cpu_samples);
  return r.samples.empty() ? r.median : stats::median(r.samples);
}

void judge_ratios(AbBench& b, double level) {
  b.ratio = stats::median_interval(b.ratios, level);
  if (!b.ratio.has_interval) {
    std::ostringstream s;
    s << b.ratios.size() << " paired round(s): too few for a " << level * 100
      << "% interval of the median (at 95% it takes 6); run more rounds";
    b.status = AbStatus::kInconclusive;
    b.note = s.str();
    return;
  }
  // The worse change at each end of the interval: for a time, a larger ratio is worse; for a
  // throughput, a smaller one. [worst_lo, worst_hi] is the interval in that orientation.
  const bool time_like = b.direction == Direction::kLowerIsBetter;
  const double w_lo = time_like ? b.ratio.lo - 1.0 : 1.0 - b.ratio.hi;
  const double w_hi = time_like ? b.ratio.hi - 1.0 : 1.0 - b.ratio.lo;
  const double t = b.threshold;
  if (w_lo > t) {
    b.status = AbStatus::kRegression;
  } else if (w_hi < -t) {
    b.status = AbStatus::kImprovement;
  } else if (w_lo >= -t && w_hi <= t) {
    b.status = AbStatus::kUnchanged;
  } else {
    std::ostringstream s;
    s << "the interval of the ratio [" << b.ratio.lo << ", " << b.ratio.hi << "] crosses the threshold band ["
      << 1.0 - t << ", " << 1.0 + t << "]: neither a change beyond the threshold nor its absence is shown; "
      << "more rounds or a quieter machine narrow it";
    b.status = AbStatus::kInconclusive;
    b.note = s.str();
  }
}

namespace {
using Key = std::pair<std::string, std::string>;  // (name, device)

// A paired round's simulated cache misses (harness/instructions.h), where both sides have them.
void add_cache_misses(const BenchmarkRecord& x, const BenchmarkRecord& y, std::map<std::string, AbBench::Beside>& out) {
  for (const auto& m : instructions::kCacheMisses) {
    auto cx = x.counters.find(m.counter), cy = y.counters.find(m.counter);
    if (cx == x.counters.end() || cy == y.counters.end() || cx->second.samples.empty() || cy->second.samples.empty()) {
      continue;
    }
    out[m.counter].base.push_back(stats::median(cx->second.samples));
    out[m.counter].next.push_back(stats::median(cy->second.samples));
  }
}

const BenchmarkRecord* find_record(const std::vector<BenchmarkRecord>& recs, const Key& k) {
  for (const BenchmarkRecord& r : recs) {
    if (r.name == k.first && r.device == k.second) return &r;
  }
  return nullptr;
}

// A benchmark only one side ran: not compared.
AbBench one_sided(const std::vector<AbRound>& rounds, const Key& k, bool in_base, double threshold) {
  AbBench b;
  b.name = k.first;
  b.device = k.second;
  b.threshold = threshold;
  b.status = in_base ? AbStatus::kBaseOnly : AbStatus::kNewOnly;
  b.note = in_base ? "only BASE ran it: not compared" : "only NEW ran it: not compared";
  for (const AbRound& r : rounds) {
    if (const BenchmarkRecord* x = find_record(in_base ? r.base : r.next, k)) b.unit = x->unit;
  }
  b.direction = direction_for_unit(b.unit);
  return b;
}

// The rounds where both sides have the benchmark, each one's values and ratio; BASE's unit returned.
std::string pair_rounds(const std::vector<AbRound>& rounds, const Key& k, const AbOptions& o, AbBench& b) {
  std::string base_unit;
  for (size_t i = 0; i < rounds.size(); ++i) {
    const BenchmarkRecord* x = find_record(rounds[i].base, k);
    const BenchmarkRecord* y = find_record(rounds[i].next, k);
    if (x) base_unit = x->unit;
    if (y) b.unit = y->unit;
    if (!x || !y) continue;
    const double bv = round_value(*x, o.cpu_time, o.instructions), nv = round_value(*y, o.cpu_time, o.instructions);
    if (!(bv > 0.0) || !(nv >= 0.0)) continue;  // no ratio of a zero or NaN base
    b.rounds.push_back(static_cast<int>(i));
    b.base.push_back(bv);
    b.next.push_back(nv);
    b.ratios.push_back(nv / bv);
    if (o.instructions) add_cache_misses(*x, *y, b.beside);
  }
  // A counter missing from some paired round is not shown: its values would not line up.
  for (auto it = b.beside.begin(); it != b.beside.end();) {
    it = it->second.base.size() == b.ratios.size() ? std::next(it) : b.beside.erase(it);
  }
  return base_unit;
}

// A benchmark both sides ran: its paired rounds judged.
AbBench two_sided(const std::vector<AbRound>& rounds, const Key& k, const AbOptions& o, double threshold) {
  AbBench b;
  b.name = k.first;
  b.device = k.second;
  b.threshold = threshold;  // the one judge_ratios applies
  const std::string base_unit = pair_rounds(rounds, k, o, b);
  b.direction = direction_for_unit(b.unit);
  if (base_unit != b.unit) {
    b.status = AbStatus::kUnitChanged;
    b.note = "unit changed from '" + base_unit + "' to '" + b.unit + "': not compared";
    b.ratios.clear();
    return b;
  }
  if (o.instructions) {  // counted per iteration, whatever the benchmark's time unit: fewer is better
    b.unit = "instructions";
    b.direction = Direction::kLowerIsBetter;
  }
  judge_ratios(b, o.level);
  if (b.ratios.size() < rounds.size()) {
    std::ostringstream s;
    s << (b.note.empty() ? "" : "; ") << rounds.size() - b.ratios.size() << " round(s) without a value on both sides left out"
      << (o.instructions ? " (no instruction counts: a build older than `bench --measure instructions`, or a "
                           "benchmark whose timed loop was not counted)"
          : o.cpu_time   ? " (a report without CPU times: a build older than cpu_samples)"
                         : "");
    b.note += s.str();
  }
  return b;
}

}  // namespace

AbResult ab_compare(const std::vector<AbRound>& rounds, const AbOptions& o) {
  AbResult result;
  result.options = o;
  result.rounds = static_cast<int>(rounds.size());
  for (const AbRound& r : rounds) result.round_info.push_back(r.info);
  // Every benchmark seen on either side, in first-seen order (NEW's, then BASE's).
  std::vector<Key> order;
  std::set<Key> seen, in_base, in_next;
  auto note = [&](const std::vector<BenchmarkRecord>& recs, std::set<Key>& side) {
    for (const BenchmarkRecord& r : recs) {
      Key k{r.name, r.device};
      side.insert(k);
      if (seen.insert(k).second) order.push_back(k);
    }
  };
  for (const AbRound& r : rounds) note(r.next, in_next);
  for (const AbRound& r : rounds) note(r.base, in_base);
  for (const Key& k : order) {
    auto th = o.metric_thresholds.find(k.first);
    const double threshold = th != o.metric_thresholds.end() ? th->second : o.threshold;
    result.benchmarks.push_back(in_base.count(k) && in_next.count(k) ? two_sided(rounds, k, o, threshold)
                                                                      : one_sided(rounds, k, in_base.count(k) > 0, threshold));
  }
  return result;
}

int exit_code_for(const AbResult& r) {
  if (r.count(AbStatus::kRegression) > 0) return 1;
  if (r.options.strict && r.count(AbStatus::kInconclusive) > 0) return 1;
  return 0;
}

std::vector<bool> ab_orders(uint64_t seed, int rounds) {
  // mt19937_64's output is fixed by the standard (the distributions' are not): its top bit is the
  // coin, so a seed gives the same orders with every standard library.
  std::mt19937_64 gen(seed);
  std::vector<bool> out;
  for (int i = 0; i < rounds; ++i) out.push_back((gen() >> 63) == 0);
  return out;
}

}  // namespace tc
