// The numerics fingerprint of a cell that trains: what its run computed, compact enough for every
// report and exact enough to decide bitwise equality from the report alone. `compare` reads it
// (harness/compare.h, "numerics") to say whether two environments (LibTorch versions, thread
// counts, machines) train the same numbers. For checks (suites/); uses LibTorch.
//
//   std::vector<double> losses;                       // each train_step().loss, in order
//   for (...) losses.push_back(run->train_step().loss);
//   f.metrics()["fingerprint"] = training_fingerprint("the first same-seed run", losses, run->parameters());
//
// Which run a check fingerprints must be deterministic in one environment (one build, one thread
// count): the cell's seed, its reference run of the recipe, never a run seeded from the clock.
//
// metrics.fingerprint (docs/reports.md):
//   format      "torchconform.fingerprint/1"
//   run         which run of the check this is (text)
//   steps       number of losses
//   loss_hex    each step's loss exactly, as C99 hex floats ("%a" of the double train_step returned:
//               "0x1.26b6a8p+1"; "nan", "inf" as such), so that NaN survives JSON and equality is bitwise
//   params      over every parameter tensor, in the order the recipe lists them:
//     tensors, elements   how many tensors and elements
//     sha256      SHA-256 of, per tensor in order: its name, NUL, its dtype name, NUL, its shape
//                 ("16x3x3x3"), NUL, then its elements' bytes (contiguous, native byte order)
//     sum, sum_squares, l2_norm, max_abs   in float64, summed element by element in order (one thread,
//                 so that the figures depend on the parameters alone, not on the thread count)
//     non_finite  how many elements are NaN or infinite (left out of the sums)
//   largest     the (up to) 3 largest tensors by element count: name, shape, elements, sha256 (of that
//               tensor alone, same layout), l2_norm, max_abs
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/contract/run.h"

namespace tc {

inline constexpr const char* kFingerprintFormat = "torchconform.fingerprint/1";

// `losses`: each step's loss as train_step() returned it; `params`: the run's parameters() after its
// last step (views are fine: the bytes are read, nothing is kept).
nlohmann::json training_fingerprint(const std::string& run, const std::vector<double>& losses, const NamedTensors& params);

// The one digest of a set of parameters: SHA-256 (hex) of, per tensor in order, its name, NUL, its
// dtype name, NUL, its shape, NUL and its bytes, on the CPU (the fingerprint's "sha256").
std::string parameters_digest(const NamedTensors& params);

// "%a" of v ("0x1.8p+1", "-0x0p+0", "nan", "inf"); strtod reads every such string back to v's bits
// (NaN payloads aside).
std::string hex_float(double v);

}  // namespace tc
