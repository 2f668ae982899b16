// `torchconform run`: the matrix check x recipe x device, a report (JSON, HTML) and the exit code
// of the cells: 0 every cell as expected, 1 a cell missed, false_alarm, fail or error, 77 every
// cell skipped, 2 bad usage or input.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "harness/cli.h"
#include "harness/cli/common.h"
#include "harness/console.h"
#include "harness/contract/python_loader.h"
#include "harness/contract/registry.h"
#include "harness/devices.h"
#include "harness/html_writer.h"
#include "harness/multi_process.h"
#include "harness/rank_server.h"
#include "harness/recipe_process.h"
#include "harness/report_json.h"
#include "harness/runner.h"
#include "harness/util/breadcrumb.h"
#include "harness/util/posix_fs.h"
#include "harness/util/termination.h"

namespace tc::cli {
namespace {

using nlohmann::json;

struct RunArgs {
  std::string device = "auto";
  std::vector<std::string> checks, recipes;
  std::vector<std::string> python;  // --python FILE.py:Class[=name], repeatable
  int64_t seed = 1234;
  bool quick = false;
  bool sweep = false;
  bool no_sweep = false;
  bool judged_only = false;
  bool no_distributed = false;
  std::string work_dir;  // multi-process worker: shared by the ranks (default under reports/)
  std::string part;      // a fresh process of CheckContext::in_fresh_process: one part of one cell
  bool in_process = false;   // no recipe processes (a debugger's run)
  std::string recipe_processes = "fork";  // how they start: fork (while single-threaded) or exec
  int cell_timeout_s = 0;    // 0: each check's own Timeout
  int startup_timeout_s = 120;  // a recipe process's start-up, apart from the cells' deadlines
  std::string cell_stream;   // a recipe's process: where its finished cells go (recipe_process.h)
  std::string breadcrumb;    // a recipe's process: where it keeps its place (util/breadcrumb.h)
  std::string json_path = "reports/latest.json";
  std::string html_path = "reports/latest.html";
  double parse_memory_mb = 0.0;  // 0: TORCHCONFORM_PARSE_MEMORY_MB as it is (default 4096)
  double parse_seconds = 0.0;    // 0: TORCHCONFORM_PARSE_SECONDS as it is (default 60)
};

// Multi-process checks: outside torchrun the runner launches torchrun for each of their cells (or
// --no-distributed leaves them out); under torchrun only they run, each rank its share, and only
// rank 0 judges and writes the report.
std::vector<std::string> checks_for_this_process(const Registry& reg, const RunPlan& plan, bool no_distributed) {
  if (!plan.worker && !no_distributed) return plan.checks;
  std::vector<std::string> wanted = plan.checks;
  if (wanted.empty()) {
    for (const CheckInfo& c : reg.checks()) wanted.push_back(c.name);
  }
  std::vector<std::string> kept;
  for (const std::string& c : wanted) {
    const CheckInfo* info = reg.find_check(c);
    if (info == nullptr || info->multi_process() == plan.worker) kept.push_back(c);  // unknown: plan_cells names it
  }
  if (kept.empty()) {
    throw UsageError(plan.worker ? "under torchrun only the multi-process checks run (e.g. --check distributed)"
                                 : "--no-distributed leaves no check to run");
  }
  return kept;
}

// The plan of `run`: filters, devices, multi-process checks. Bad usage throws UsageError.
RunPlan plan_run(const Registry& reg, const RunArgs& a) {
  for (const std::string& p : reg.validate()) throw UsageError(p);
  RunPlan plan;
  plan.checks = split_list(a.checks);
  plan.recipes = split_list(a.recipes);
  plan.seed = a.seed;
  plan.quick = a.quick;
  plan.sweep = a.sweep;
  plan.no_sweep = a.no_sweep;
  plan.judged_only = a.judged_only;
  plan.cuda_present = cuda_available();
  plan.executable = self_executable();
  plan.worker = under_torchrun();
  plan.work_dir = a.work_dir;
  plan.part = a.part;
  if (a.cell_timeout_s < 0) throw UsageError("--cell-timeout must be a number of seconds, 0 for each check's own");
  plan.cell_timeout_s = a.cell_timeout_s;
  if (a.startup_timeout_s <= 0) throw UsageError("--startup-timeout must be a positive number of seconds");
  plan.startup_timeout_s = a.startup_timeout_s;
  plan.cell_stream = a.cell_stream;
  plan.fork_recipe_processes = a.recipe_processes == "fork";
  // The judging process runs no recipe code: each recipe's cells go to a process of their own,
  // except in a process that is already one (a recipe's, a part's, a torchrun rank) or on request.
  // (TORCHCONFORM_RECIPE_PROCESS: this process was started as a recipe's, and its program did not
  // take `run` as the command line does, e.g. a test binary whose cli_main is called in-process: it
  // never starts another, so no chain of them forms.)
  plan.isolate = !a.in_process && a.cell_stream.empty() && a.part.empty() && !plan.worker && !plan.executable.empty() &&
                 std::getenv("TORCHCONFORM_RECIPE_PROCESS") == nullptr;
  if (!plan.part.empty() && (plan.checks.size() != 1 || plan.recipes.size() != 1)) {
    throw UsageError("--part runs a part of one cell: give one --check and one --recipe");
  }
  if (plan.work_dir.empty()) {
    const char* id = std::getenv("TORCHELASTIC_RUN_ID");
    plan.work_dir = std::string("reports/distributed/") + (id && *id ? id : "run");
  }
  plan.checks = checks_for_this_process(reg, plan, a.no_distributed);
  try {
    plan.devices = resolve_devices(a.device);
    if (plan_cells(reg, plan).empty()) {
      if (plan.judged_only) {
        RunPlan all = plan;
        all.judged_only = false;
        if (!plan_cells(reg, all).empty()) {
          throw UsageError("nothing to run: --judged-only leaves no cell (no variant given targets a check given; "
                           "`torchconform list` shows which checks must catch each variant)");
        }
      }
      // Otherwise only ->Languages leaves a selection of known checks and recipes without a cell.
      std::string why;
      for (const CheckInfo& c : reg.checks()) {
        const bool chosen = plan.checks.empty() || std::find(plan.checks.begin(), plan.checks.end(), c.name) != plan.checks.end();
        if (chosen && !c.languages.empty()) why += "; " + c.name + ": " + c.languages_why;
      }
      throw UsageError(why.empty() ? "nothing to run: no check or recipe is registered"
                                   : "nothing to run: no check given judges the recipes given" + why);
    }
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  return plan;
}

// Runs the plan's cells with a line of progress per cell on stderr (and the running cell on a
// terminal).
std::vector<Cell> run_with_progress(const Registry& reg, const RunPlan& plan) {
  const bool tty = isatty(STDERR_FILENO) != 0;
  RunCallbacks cb;
  cb.on_start = [&](const PlannedCell& p, size_t i, size_t n) {
    if (tty) {
      std::cerr << "[" << i + 1 << "/" << n << "] running " << p.check->name << " / "
                << p.recipe->name << " / " << p.device.name << " ...\r" << std::flush;
    }
  };
  cb.on_done = [&](const Cell& c, size_t i, size_t n) {
    if (tty) std::cerr << "\33[2K";
    print_cell_line(std::cerr, c, i, n);
  };
  return run_cells(reg, plan, cb);
}

// --parse-memory-mb / --parse-seconds: the limits under which a checkpoint file is first parsed in
// a child process (reference/bounded_parse.h reads them from the environment, as do the processes
// a check starts).
void apply_parse_limits(const RunArgs& a) {
  if (a.parse_memory_mb < 0 || a.parse_seconds < 0) throw UsageError("--parse-memory-mb and --parse-seconds must be positive");
  if (a.parse_memory_mb > 0) setenv("TORCHCONFORM_PARSE_MEMORY_MB", std::to_string(a.parse_memory_mb).c_str(), 1);
  if (a.parse_seconds > 0) setenv("TORCHCONFORM_PARSE_SECONDS", std::to_string(a.parse_seconds).c_str(), 1);
}

// torchrun's ranks on the CPU forked from a template made now, before any recipe file is loaded
// (harness/rank_server.h), where this run may launch a multi-process check there; elsewhere, or
// where the template cannot be made, they start by exec.
void start_rank_template(const RunArgs& a) {
  // A recipe's process, a part's or a rank: its judging process made the template, or none.
  if (under_torchrun() || !a.cell_stream.empty() || !a.part.empty()) return;
  unsetenv(rank_server::kSocketVar);  // one inherited from another run is that run's
  if (a.recipe_processes != "fork" || a.no_distributed) return;
  bool cpu = false;
  for (const DeviceSlot& d : resolve_devices(a.device)) cpu = cpu || (d.name == "cpu" && d.available);
  const std::vector<std::string> checks = split_list(a.checks);
  bool multi = false;
  for (const CheckInfo& c : Registry::global().checks()) {
    multi = multi || (c.multi_process() && (checks.empty() || std::find(checks.begin(), checks.end(), c.name) != checks.end()));
  }
  // A machine with a GPU: resolve_devices has asked the CUDA driver already, and a process forked
  // after that cannot use CUDA (a CPU rank's report still reads the devices): ranks by exec there.
  if (!cpu || !multi || cuda_available()) return;
  if (!a.python.empty()) {
    const PythonStarter* start = python_starter();
    try {
      if (start == nullptr || !(*start)()) return;
    } catch (const std::exception&) {
      return;  // load_python_recipes says why the interpreter cannot start
    }
  }
  (void)rank_server::start(cli_main, self_executable());  // not made: the ranks start by exec
}

int cmd_run(const RunArgs& a, int argc, char** argv) {
  apply_parse_limits(a);
  apply_thread_count();  // before the environment is captured: the report records the count used
  // The device before the Python recipes load (an interpreter and torch, seconds): `--device cuda`
  // on a machine without one is told at once (plan_run resolves the devices again, for the plan).
  (void)resolve_devices(a.device);
  start_rank_template(a);
  load_python_recipes(a.python);
  RunArgs args = a;  // generated recipes named by --recipe (gen-17, gen-1..20-*) made and spelt out
  args.recipes = Registry::global().materialize(split_list(a.recipes));
  const Registry& reg = Registry::global();
  const RunPlan plan = plan_run(reg, args);
  json devices = json::array();
  for (const DeviceSlot& d : plan.devices) devices.push_back(d.name);
  Report report = report_header(argc, argv, a.seed, devices);
  report.run["quick"] = a.quick;
  report.run["sweep"] = a.sweep;
  report.run["no_sweep"] = a.no_sweep;
  report.run["judged_only"] = a.judged_only;

  if (plan.worker && torchrun_rank() != 0) {  // rank 0 reports; the others only say what broke
    report.cells = run_cells(reg, plan);
    for (const Cell& c : report.cells) {
      if (c.verdict == Verdict::kError) print_cell_line(std::cerr, c, 0, 1);
    }
    // Their cells are rank 0's to judge (they may read as skipped here): 0 unless one broke.
    return exit_code_for(report.cells) == 1 ? 1 : 0;
  }
  if (!plan.cell_stream.empty()) {
    stream_cells(reg, plan, a.breadcrumb);
    return 0;  // the process that started it judges the cells
  }
  std::cerr << "torchconform: " << plan_cells(reg, plan).size() << " cells (" << plan.devices.size()
            << " device(s)), seed " << a.seed << (a.quick ? ", quick" : "")
            << (plan.isolate ? ", each recipe in a process of its own" : ", in this process") << '\n';
  report.cells = run_with_progress(reg, plan);
  report.not_applicable = not_applicable_cells(reg, plan);
  report.run["ended_at"] = utc_now();
  print_summary(std::cout, report.cells, report.not_applicable);
  if (!a.json_path.empty()) write_output(a.json_path, report_to_json(report).dump(2) + "\n");
  if (!a.html_path.empty()) write_output(a.html_path, render_html(report));
  return exit_code_for(report.cells);
}

}  // namespace

Command add_run(CLI::App& app, int argc, char** argv) {
  auto a = std::make_shared<RunArgs>();
  auto* run = app.add_subcommand("run", "Run the matrix check x recipe x device and write a report");
  run->add_option("--device", a->device, "cpu | cuda | auto (best available) | all")->capture_default_str();
  run->add_option("--check", a->checks, "Only these checks (comma-separated)");
  run->add_option("--recipe", a->recipes,
                  "Only these recipes (comma-separated). Generated ones (docs/generated.md): gen-SEED, a draw of the "
                  "generator; gen-SEED-OPERATOR, one mutant of it; gen-A..B, the draws A to B; gen-A..B-*, every "
                  "mutant of them; gen-A..B-@CHECK, those CHECK must catch");
  run->add_option("--python", a->python,
                  "A Python recipe, FILE.py:CLASS (a torchconform.Run subclass) or FILE.py:CLASS=NAME; repeatable. "
                  "Its name: NAME, else the class's `name`, else the class name in snake_case (docs/python.md)");
  run->add_option("--seed", a->seed, "Seed of the reference runs")->capture_default_str();
  run->add_flag("--quick", a->quick, "Shorter runs: fewer steps and trials, and no measured sweep unless --sweep asks");
  CLI::Option* sweep = run->add_flag("--sweep", a->sweep,
                "Also run the costly measured sweeps (data_saturation's workers x prefetch, about 15 s a recipe) "
                "for recipes other than the suite's reference, which gets them unless --quick");
  run->add_flag("--no-sweep", a->no_sweep,
                "Leave those sweeps out for every recipe, the suite's reference included: they are measured, never "
                "judged, and the verdicts are the same without them")
      ->excludes(sweep);
  run->add_flag("--judged-only", a->judged_only,
                "Give a broken variant cells only on the checks it targets (must_be_caught_by), where its "
                "verdict is judged; without it, it also runs on every other check selected, recorded there, "
                "never judged. Correct recipes run on every check either way");
  run->add_flag("--no-distributed", a->no_distributed,
                "Leave out the multi-process checks (they launch torchrun: 2 ranks with Gloo on the CPU, "
                "one rank per GPU with NCCL)");
  run->add_option("--parse-memory-mb", a->parse_memory_mb,
                  "Memory a checkpoint's first parse may take, in MiB (default 4096): LibTorch's reader meets a "
                  "file first in a child process under this and --parse-seconds; a file over either is refused");
  run->add_option("--parse-seconds", a->parse_seconds, "Time a checkpoint's first parse may take (default 60)");
  run->add_option("--cell-timeout", a->cell_timeout_s,
                  "A cell's deadline in seconds (default 0: each check's own, 900 s unless it says more); a cell "
                  "not finished by then is killed and is `error`, naming where the recipe was. It counts from the "
                  "cell's start, not the start-up of the recipe's process (--startup-timeout)");
  run->add_option("--startup-timeout", a->startup_timeout_s,
                  "The time a recipe's process may take to start, in seconds, before its first cell: loading this "
                  "program, the Python interpreter, torch and the recipe's module again where it starts by exec "
                  "(default 120). Past it the process is killed and its first cell is `error`")
      ->capture_default_str();
  run->add_flag("--in-process", a->in_process,
                "Run the recipes' code in this process (for a debugger): a recipe that exits, crashes or hangs "
                "then ends or stalls the run, and no cell has a deadline. By default each recipe runs in a "
                "process of its own and this one judges (docs/security.md)");
  run->add_option("--recipe-processes", a->recipe_processes,
                  "How each recipe's process starts: fork (a copy of this process, with the libraries, the "
                  "interpreter and the recipes' modules loaded already; exec when this process has started "
                  "threads) or exec (this program started again, everything loaded again: slower). With fork "
                  "a torchrun rank on the CPU is forked too, from a copy of this process made before any recipe "
                  "file is loaded (the recipe's module is imported in the rank, as by exec)")
      ->check(CLI::IsMember({"fork", "exec"}))
      ->capture_default_str();
  run->add_option("--json", a->json_path, "Report JSON path ('' to skip)")->capture_default_str();
  run->add_option("--html", a->html_path, "Report HTML path ('' to skip)")->capture_default_str();
  // Internal: what the runner passes to the processes it starts (hidden from --help).
  run->add_option("--work-dir", a->work_dir,
                  "Under torchrun: the directory every rank of a multi-process check shares")
      ->group("");
  run->add_option("--part", a->part, "Run only this part of the one cell given (a check's fresh process)")
      ->group("");
  run->add_option("--cell-stream", a->cell_stream, "A recipe's process: append each finished cell to this file")
      ->group("");
  run->add_option("--breadcrumb", a->breadcrumb, "A recipe's process: keep its place in this file")->group("");
  run->footer(
      "Environment: TORCHCONFORM_THREADS=N sets LibTorch's intra-op threads for the whole run (every cell and "
      "the processes it starts; recorded in the report); TORCHCONFORM_PARSE_MEMORY_MB and "
      "TORCHCONFORM_PARSE_SECONDS are what --parse-memory-mb and --parse-seconds set; TORCHCONFORM_VENV is the venv "
      "whose site-packages a --python recipe's interpreter uses (default: the one the build was configured with; "
      "docs/python.md); TORCHCONFORM_CUDA=1 loads LibTorch's CUDA half (libtorchconform_cuda.so, beside this "
      "program) where no CUDA driver is, =0 never (by default: where a driver is, or Python recipes run; the "
      "report's environment.gpu.cuda_support says which).\n"
      "Exit codes: 0 every cell as expected, 1 a cell missed, false_alarm, fail or error, 77 every cell "
      "skipped (nothing checked), 2 bad usage or input.");
  return {run, [a, argc, argv] { return cmd_run(*a, argc, argv); }};
}

}  // namespace tc::cli
