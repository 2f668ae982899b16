// The assessment of `torchconform qualify`, pure functions over the ranks' figures (no I/O, no
// torch): which device is off the others by more than a robust bound, and whose training
// fingerprint differs from the majority's.
//
// For each figure and each rank i, against the OTHER ranks' medians (leave-one-out, so that the
// outlier does not pull the reference towards itself):
//   centre = median(others), mad = median(|others - centre|),
//   bound  = max(k * 1.4826 * mad, floor * centre)      (1.4826 * MAD estimates a normal sigma)
//   flagged when value < centre - bound.
// Every figure is a rate (higher is better) and only the slow side is flagged: with two ranks the
// reference of each is the other, and a symmetric test would flag both of a pair with one slow
// device. The floor keeps the bound from collapsing when the others agree closely (with two ranks
// their MAD is 0 by definition).
#pragma once

#include <string>
#include <vector>

#include "harness/contract/qualify_probe.h"

namespace tc::qualify {

struct Bounds {
  double k = 5.0;        // MADs (scaled to a normal sigma by 1.4826)
  double floor = 0.30;   // fraction of the others' median: the smallest bound (docs/qualify.md: from measurement)
};

// One rank's figure against the others'.
struct Deviation {
  double value = 0.0;
  double centre = 0.0;    // the others' median
  double mad = 0.0;       // the others' median absolute deviation (unscaled)
  double bound = 0.0;     // max(k * 1.4826 * mad, floor * centre)
  double relative = 0.0;  // (value - centre) / centre
  bool flagged = false;
};

// Deviation of values[i] against the others. Needs at least two values; throws
// std::invalid_argument otherwise.
Deviation deviation(const std::vector<double>& values, size_t i, const Bounds& bounds);

double mad(const std::vector<double>& v);  // median absolute deviation from the median; NaN if empty

struct FigureVerdict {
  std::string figure, unit;
  std::vector<Deviation> per_rank;  // in the order of QualifyResult::ranks
};

struct FingerprintVerdict {
  std::string majority_digest;       // empty when no fingerprint has a strict majority
  int majority_count = 0;
  std::vector<bool> differs;          // per rank: not the majority's (all, when there is none)
};

struct Flag {
  int rank = 0;
  std::string what;  // "matmul 0.031 TFLOP/s is 48% below the others' median 0.060 (bound 15%)"
};

struct Assessment {
  std::vector<FigureVerdict> figures;
  FingerprintVerdict fingerprint;
  std::vector<Flag> flags;  // in rank order; empty: every device qualified
};

// Judges ranks (as gathered by rank 0; at least two ranks are needed to compare anything: with one,
// nothing can be off the others and the assessment says so by having no figure verdicts). A figure
// missing on some ranks is judged among the ranks that have it.
Assessment assess(const std::vector<RankResult>& ranks, const Bounds& bounds);

}  // namespace tc::qualify
