// Plain value records the runner makes and the reporters format (no torch, no I/O).
// Installed (docs/api.md): checks include registry.h, recipe authors harness/contract/run.h.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tc {

enum class Expected { kPass, kFail, kAny };
enum class Outcome { kPass, kFail, kNone };  // kNone: the check did not get to an outcome
enum class Verdict { kOk, kMissed, kFalseAlarm, kError, kSkipped, kFail };
// Whose recipe a cell ran. The suite's own recipes are its controls: its reference (registered
// with ->Control(): it must pass) and its broken variants (->MustBeCaughtBy: they must be caught).
// Any other recipe is a subject under test, a user's code: its result is the finding itself.
enum class Role { kReference, kVariant, kSubject };

const char* to_string(Expected e);
const char* to_string(Outcome o);
const char* to_string(Verdict v);
const char* to_string(Role r);
Expected expected_from_string(const std::string& s);
Outcome outcome_from_string(const std::string& s);
Verdict verdict_from_string(const std::string& s);
Role role_from_string(const std::string& s);

// The verdict of a cell that ran to an outcome. Pure: the whole verdict logic (docs/design.md).
//   expected pass, outcome pass -> ok       expected fail, outcome fail -> ok
//   expected pass, outcome fail -> false_alarm (the suite's reference)
//                                  fail        (a subject: the user's recipe breaks the practice)
//   expected fail, outcome pass -> missed   (the check has no teeth for that variant)
//   expected any                -> ok       (recorded, not judged)
//   outcome none                -> error
Verdict judge(Expected expected, Outcome outcome, Role role);

struct Cell {
  std::string check;
  std::string recipe;
  std::string device;
  Role role = Role::kReference;
  std::string language;  // the recipe's language: "python" for a `run --python` recipe; empty: C++
  Expected expected = Expected::kAny;
  Outcome outcome = Outcome::kNone;
  Verdict verdict = Verdict::kError;
  std::string evidence;
  nlohmann::json metrics = nlohmann::json::object();
  double duration_s = 0.0;
};

// A Google Benchmark user counter of one benchmark (state.counters["MFU"], ...): its value in each
// repetition, in the order of BenchmarkRecord::samples, and the median of those values.
struct BenchmarkCounter {
  std::vector<double> samples;
  double median = 0.0;
};

struct BenchmarkRecord {
  std::string name;
  std::string device;
  std::string unit;
  std::vector<double> samples;      // real (wall-clock) time per repetition, in `unit`
  double median = 0.0;
  double cv = 0.0;
  std::map<std::string, BenchmarkCounter> counters;  // counter name -> per repetition; empty if none
  // CPU time of the benchmark's thread per repetition, in `unit`, in the order of samples (Google
  // Benchmark's cpu_time); empty in reports written before it was kept.
  std::vector<double> cpu_samples;
};

struct Summary {
  std::map<std::string, int> counts;  // verdict name -> count; every verdict present
  int total = 0;
  // role name -> verdict name -> count, and "total"; only the roles that have cells
  std::map<std::string, std::map<std::string, int>> by_role;
  // Per check, the cells (not skipped) that ended a promise not judged (status "recorded": measured
  // or preconditioned, no verdict), and per promise how many: check -> promise -> cells ("" -> any).
  std::map<std::string, std::map<std::string, int>> not_judged;
  // Per check, its teeth on this run's own controls and variants (the suite's reference and broken
  // variants; generated draws and their mutants, docs/generated.md). Skipped cells and errors are
  // counted apart from both rates; a targeted variant whose declared promises (metrics
  // "declared_breaks", set by the runner) all ended not judged, its mistake changing nothing on that
  // run's data, is neither caught nor missed: counted apart and out of the score.
  struct Teeth {
    int controls = 0;             // control cells judged (ok or false_alarm)
    int false_alarms = 0;         // controls the check failed
    int controls_not_judged = 0;  // of the controls, those with a promise recorded, not judged
    int variants = 0;             // targeted variant cells judged (caught or missed)
    int caught = 0;
    int missed = 0;
    int variants_not_judged = 0;  // every declared promise recorded, not judged: out of the score
    int errors = 0, skipped = 0;  // controls and variants alike
    // caught / variants and false_alarms / controls; negative where there is nothing to divide.
    double mutation_score() const { return variants > 0 ? static_cast<double>(caught) / variants : -1.0; }
    double false_alarm_rate() const { return controls > 0 ? static_cast<double>(false_alarms) / controls : -1.0; }
  };
  std::map<std::string, Teeth> teeth;  // only the checks that ran a control or a variant
};

Summary summarize(const std::vector<Cell>& cells);

// Exit code of `run` for a set of cells: 1 when any is missed, false_alarm or error; 77 when every
// cell was skipped (nothing checked: CTest's SKIP_RETURN_CODE); 0 otherwise.
int exit_code_for(const std::vector<Cell>& cells);

// A check x recipe x device the run left out: the check cannot judge a recipe in that language
// (CheckInfo::languages). Not a cell: reported apart, counted as "not applicable".
struct NotApplicable {
  std::string check, recipe, device;
  std::string reason;
};

struct Report {
  nlohmann::json tool;         // name, version, git_commit
  nlohmann::json run;          // started_at, ended_at, argv, seed, devices, quick
  nlohmann::json environment;  // see environment.h
  std::vector<Cell> cells;
  std::vector<BenchmarkRecord> benchmarks;
  std::vector<NotApplicable> not_applicable;
};

inline constexpr const char* kReportSchema = "torchconform.report/1";

}  // namespace tc
