#include "harness/qualify/assess.h"

#include <cmath>
#include <map>
#include <sstream>
#include <stdexcept>

#include "harness/util/statistics.h"
#include "harness/util/text_format.h"

namespace tc::qualify {

double mad(const std::vector<double>& v) {
  if (v.empty()) return std::nan("");
  const double m = stats::median(v);
  std::vector<double> dev;
  dev.reserve(v.size());
  for (double x : v) dev.push_back(std::fabs(x - m));
  return stats::median(dev);
}

Deviation deviation(const std::vector<double>& values, size_t i, const Bounds& bounds) {
  if (values.size() < 2 || i >= values.size()) {
    throw std::invalid_argument("a deviation needs the value and at least one other");
  }
  std::vector<double> others;
  for (size_t j = 0; j < values.size(); ++j) {
    if (j != i) others.push_back(values[j]);
  }
  Deviation d;
  d.value = values[i];
  d.centre = stats::median(others);
  d.mad = mad(others);
  d.bound = std::max(bounds.k * 1.4826 * d.mad, bounds.floor * std::fabs(d.centre));
  d.relative = d.centre != 0.0 ? (d.value - d.centre) / d.centre : 0.0;
  d.flagged = d.value < d.centre - d.bound;
  return d;
}

namespace {

using tc::fmt::num;  // 4 significant digits
using tc::fmt::pct;  // 1 decimal

}  // namespace

Assessment assess(const std::vector<RankResult>& ranks, const Bounds& bounds) {
  Assessment j;
  std::map<int, std::vector<std::string>> reasons;  // rank -> what is off

  if (ranks.size() >= 2) {
    // Figures in the order the first rank reports them (every rank runs the same probes).
    std::vector<std::pair<std::string, std::string>> names;
    for (const RankResult& r : ranks) {
      for (const Figure& f : r.figures) {
        bool seen = false;
        for (const auto& n : names) seen = seen || n.first == f.name;
        if (!seen) names.emplace_back(f.name, f.unit);
      }
    }
    for (const auto& [name, unit] : names) {
      std::vector<double> values;
      std::vector<size_t> who;  // index into ranks
      for (size_t r = 0; r < ranks.size(); ++r) {
        for (const Figure& f : ranks[r].figures) {
          if (f.name == name) {
            values.push_back(f.median);
            who.push_back(r);
          }
        }
      }
      if (values.size() < 2) continue;
      FigureVerdict v{name, unit, {}};
      for (size_t i = 0; i < values.size(); ++i) {
        const Deviation d = deviation(values, i, bounds);
        v.per_rank.push_back(d);
        if (d.flagged) {
          reasons[ranks[who[i]].rank].push_back(
              name + " " + num(d.value) + " " + unit + " is " + pct(-d.relative) +
              " below the others' median " + num(d.centre) + " (bound " + pct(d.bound / d.centre) +
              ": max(" + num(bounds.k) + " x 1.4826 x MAD " + num(d.mad) + ", " + pct(bounds.floor) + "))");
        }
      }
      j.figures.push_back(std::move(v));
    }

    // Fingerprints: the strict majority's digest; without one every rank differs.
    std::map<std::string, int> counts;
    for (const RankResult& r : ranks) ++counts[r.fingerprint.digest()];
    for (const auto& [digest, n] : counts) {
      if (2 * n > static_cast<int>(ranks.size())) {
        j.fingerprint.majority_digest = digest;
        j.fingerprint.majority_count = n;
      }
    }
    for (const RankResult& r : ranks) {
      const bool differs = r.fingerprint.digest() != j.fingerprint.majority_digest;
      j.fingerprint.differs.push_back(differs);
      if (!differs) continue;
      if (j.fingerprint.majority_digest.empty()) {
        reasons[r.rank].push_back("training fingerprint: no majority (" + std::to_string(counts.size()) +
                                  " different fingerprints among " + std::to_string(ranks.size()) +
                                  " ranks; this one: parameters sha256 " + r.fingerprint.params_sha256().substr(0, 16) + ")");
      } else {
        reasons[r.rank].push_back("training fingerprint differs from the majority's (" +
                                  std::to_string(j.fingerprint.majority_count) + " of " +
                                  std::to_string(ranks.size()) + " ranks): parameters sha256 " +
                                  r.fingerprint.params_sha256().substr(0, 16) + "...");
      }
    }
  }
  for (const auto& [rank, list] : reasons) {
    for (const std::string& what : list) j.flags.push_back({rank, what});
  }
  return j;
}

}  // namespace tc::qualify
