// Plain value records the runner makes and the reporters format (no torch, no I/O).
// Internal to the harness: suites include registry.h, recipe authors include harness/contract/run.h.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tc {

enum class Expected { kPass, kFail, kAny };
enum class Outcome { kPass, kFail, kNone };  // kNone: the check did not get to an outcome
enum class Verdict { kOk, kMissed, kFalseAlarm, kError, kSkipped };

const char* to_string(Expected e);
const char* to_string(Outcome o);
const char* to_string(Verdict v);
Expected expected_from_string(const std::string& s);
Outcome outcome_from_string(const std::string& s);
Verdict verdict_from_string(const std::string& s);

// The verdict of a cell that ran to an outcome. Pure: the whole verdict logic of DESIGN.md.
//   expected pass, outcome pass -> ok       expected fail, outcome fail -> ok
//   expected pass, outcome fail -> false_alarm
//   expected fail, outcome pass -> missed   (the check has no teeth for that variant)
//   expected any                -> ok       (recorded, not judged)
Verdict judge(Expected expected, Outcome outcome);

struct Cell {
  std::string check;
  std::string recipe;
  std::string device;
  Expected expected = Expected::kAny;
  Outcome outcome = Outcome::kNone;
  Verdict verdict = Verdict::kError;
  std::string evidence;
  nlohmann::json metrics = nlohmann::json::object();
  double duration_s = 0.0;
};

struct BenchmarkRecord {
  std::string name;
  std::string device;
  std::string unit;
  std::vector<double> samples;
  double median = 0.0;
  double cv = 0.0;
};

struct Summary {
  std::map<std::string, int> counts;  // verdict name -> count; every verdict present
  int total = 0;
};

Summary summarize(const std::vector<Cell>& cells);

// Exit code of `run` for a set of cells: 1 when any is missed, false_alarm or error; 77 when every
// cell was skipped (nothing checked: CTest's SKIP_RETURN_CODE); 0 otherwise.
int exit_code_for(const std::vector<Cell>& cells);

struct Report {
  nlohmann::json tool;         // name, version, git_commit
  nlohmann::json run;          // started_at, ended_at, argv, seed, devices, quick
  nlohmann::json environment;  // see environment.h
  std::vector<Cell> cells;
  std::vector<BenchmarkRecord> benchmarks;
};

inline constexpr const char* kReportSchema = "torchconform.report/1";

}  // namespace tc
