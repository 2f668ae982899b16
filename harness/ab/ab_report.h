// Reporters of `torchconform ab` (harness/ab/ab.h): plain text (stdout), the JSON document
// `torchconform.ab/1` (--json) and a self-contained HTML page (--html). Formats only; one file
// each (text.cpp, json.cpp, html.cpp). The JSON document is described in
// docs/benchmarks-and-gating.md ("ab").
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/ab/ab.h"

namespace tc {

inline constexpr const char* kAbSchema = "torchconform.ab/1";

std::string render_ab_text(const AbRunInfo& run, const AbResult& r);
// What a round is, in words (the same in text and HTML), e.g. "one repetition of each build, taking
// turns in one `bench --iterations 19 ...` each" or "a `bench --benchmark_repetitions=3 ...` of each build".
std::string ab_round_description(const AbRunInfo& run);
// The one-line gate verdict, e.g. "ab gate: FAIL (1 regressed, 0 inconclusive, 2 unchanged, 0 improved)".
std::string ab_gate_line(const AbResult& r);
// A build's environment as the text and HTML reports show it: "K=V K2=V2".
std::string ab_env_text(const std::vector<std::pair<std::string, std::string>>& env);
nlohmann::json ab_to_json(const AbRunInfo& run, const AbResult& r);
std::string render_ab_html(const AbRunInfo& run, const AbResult& r);

}  // namespace tc
