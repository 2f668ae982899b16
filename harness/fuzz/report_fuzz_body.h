// The report readers' fuzz body, shared by the libFuzzer target (harness/fuzz/report_fuzz.cpp) and
// the replay of committed crashers under ctest (Fuzz.ReportRegressionsReplay).
//
// Contract under test: any bytes given to the readers that `report`, `bench --json`, `compare` and
// `trend` use either parse into a Report or throw ReportFormatError; never another exception, a
// crash, a hang or a memory error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "harness/gbench_json.h"
#include "harness/report_json.h"

namespace tc::fuzz {

// Returns true when the bytes were accepted as a report.
inline bool report_one(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const nlohmann::json j = parse_json_text(text, "fuzz-input");
    // read_comparable_file's logic: a Google Benchmark file or a torchconform report.
    Report r = looks_like_google_benchmark(j) ? report_from_google_benchmark(j) : report_from_json(j);
    // What the commands do next with a report: write it again.
    (void)report_to_json(r).dump(2);
    return true;
  } catch (const ReportFormatError&) {
    return false;
  }
}

}  // namespace tc::fuzz
