// distributed's judgement (suites/distributed/check.cpp gathers the records): rank 0 judges every
// rank's records of the two runs and of the resume, one function per promise.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "harness/contract/registry.h"

namespace tc::distributed {

// float32 gradient sums in another order: tolerance relative to each tensor's largest |gradient|
// (check.cpp's header comment derives it).
constexpr double kGradRelTolerance = 1e-4;
// Epochs of each of the two runs every rank trains.
constexpr int kEpochs = 2;

// all[r] = {"runs": rank r's records of the two runs, "resume": its resume} -> the cell's result.
CheckResult assess_ranks(const std::vector<nlohmann::json>& all, const World& w);

}  // namespace tc::distributed
