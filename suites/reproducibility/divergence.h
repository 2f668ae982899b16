// What a second run in a fresh process says of a difference between this process's run and a first
// fresh process's (the reproducibility check's other_process_bitwise), from the three runs'
// fingerprints (every loss's bits, each parameter's hash, the evaluation's bits and hash). Plain
// JSON, no LibTorch: divergence_test.cpp holds every branch.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tc::reproducibility {

enum class Divergence {
  kSecondAgreesHere,   // the first fresh run was the odd one: runs differ from run to run, not per process
  kFreshAgree,         // both fresh processes agree, this one differs: something this process holds
  kEachDiffers,        // all three differ: something fixed once per process reaches training
};

// Whether two fingerprints are of bitwise-equal runs.
bool same_run(const nlohmann::json& a, const nlohmann::json& b);

Divergence classify(const nlohmann::json& here, const nlohmann::json& first, const nlohmann::json& second);

// The words the evidence gives for it; `in_process_agreed`: the two runs in this process were
// bitwise equal (only then is "per process" shown).
std::string explain(Divergence d, bool in_process_agreed);
const char* to_string(Divergence d);

}  // namespace tc::reproducibility
