// What a second run in a fresh process says of a difference between this process's run and a first
// fresh process's (the reproducibility check's other_process_bitwise), from the three runs'
// fingerprints (every loss's bits, each parameter's hash, the evaluation's bits and hash). Plain
// JSON, no LibTorch: divergence_test.cpp holds every branch.
#pragma once

#include <functional>
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

// kSecondAgreesHere: how many more fresh processes are run to see whether a run-to-run difference
// repeats. One odd run among four with the seed, and none among these, is not laid to the recipe: a
// difference that never repeats may come from outside it (a BLAS library that chooses its thread
// count by the machine's load reads the same), and a gate that fails one run in hundreds is noise.
// A recipe whose runs differ often enough to be told (a race in a quarter of its runs) differs in
// one of them with probability 1 - (3/4)^3 = 58% or more, and in the first pair already.
inline constexpr int kRepeatRuns = 3;

// Runs `again` (a fresh process's fingerprint) up to `runs` times: the 1-based run that differed from
// `here` (and stops there), 0 when none did.
int first_repeat(const nlohmann::json& here, const std::function<nlohmann::json()>& again, int runs = kRepeatRuns);

// The words for a run-to-run difference that did not repeat in `agreeing` more fresh processes.
std::string not_repeated(int agreeing);
// ... and for one that did: fresh run `which` (1-based, of `runs` more) differed from this process's too.
std::string repeated(int which, int runs);

}  // namespace tc::reproducibility
