#include "harness/cell_in_child.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "harness/report_json.h"
#include "harness/contract/python_loader.h"
#include "harness/contract/scratch.h"
#include "harness/settings.h"
#include "harness/util/forking.h"
#include "harness/util/posix_fs.h"

namespace tc {

CellFromChild run_cell_in_child(const CellChild& spec, const CheckContext& ctx) {
  if (spec.executable.empty()) throw HarnessError("no executable to start for " + spec.what + " (RunPlan::executable)");
  Scratch scratch("torchconform-child-");
  const std::string report = scratch.file("cell.json"), log = scratch.file("cell.log");
  child::Spec launch;
  std::vector<std::string>& argv = launch.argv;
  argv = spec.launcher;
  argv.insert(argv.end(), {spec.executable, "run", "--device", ctx.device, "--check", ctx.check, "--recipe",
                           ctx.recipe, "--seed", std::to_string(ctx.seed), "--json", report, "--html", ""});
  launch.argv.insert(launch.argv.end(), spec.extra.begin(), spec.extra.end());
  for (const std::string& python : ctx.python_specs) {  // a Python recipe is known there only when loaded again
    launch.argv.push_back("--python");
    launch.argv.push_back(python);
  }
  if (ctx.quick) launch.argv.push_back("--quick");
  if (ctx.sweep) launch.argv.push_back("--sweep");
  if (ctx.no_sweep) launch.argv.push_back("--no-sweep");
  launch.log_path = log;
  launch.timeout = spec.timeout;
  if (spec.torchrun_in_fork && !spec.launcher.empty() && python_torchrun() != nullptr && forking::single_threaded()) {
    launch.body = [argv = launch.argv] {
      const std::vector<std::string> args(argv.begin() + 1, argv.end());
      const int rc = (*python_torchrun())(args);
      if (rc != -1) return rc;
      std::vector<char*> exec_argv;  // no interpreter of this process's: torchrun by exec after all
      for (const std::string& a : argv) exec_argv.push_back(const_cast<char*>(a.c_str()));
      exec_argv.push_back(nullptr);
      execv(exec_argv[0], exec_argv.data());
      std::fprintf(stderr, "torchconform: cannot start %s: %s\n", exec_argv[0], std::strerror(errno));
      return 127;
    };
  }
  // torchrun stops its workers on SIGTERM (it needs the default grace); the binary alone, a few s.
  if (spec.launcher.empty()) launch.kill_grace = std::chrono::seconds(5);
  CellFromChild out;
  try {
    out.exit = child::run(launch);
  } catch (const std::runtime_error& e) {
    throw HarnessError(spec.what + ": " + e.what());
  }
  out.log_tail = child::tail_of(log);
  if (out.exit.timed_out) {
    throw HarnessError(spec.what + " did not finish in " + std::to_string(spec.timeout.count()) +
                       " s and was killed:\n" + out.log_tail);
  }
  Report rep;
  try {
    rep = read_report_file(report);
  } catch (const std::exception&) {
    throw HarnessError(spec.what + " exited with " + std::to_string(out.exit.exit_code) + " and wrote no report:\n" +
                       out.log_tail);
  }
  for (Cell& c : rep.cells) {
    if (c.check != ctx.check || c.recipe != ctx.recipe) continue;
    out.cell = std::move(c);
    return out;
  }
  throw HarnessError(spec.what + " reported no " + ctx.check + " cell for '" + ctx.recipe + "'");
}

nlohmann::json run_part_in_fresh_process(const std::string& executable, const CheckContext& ctx,
                                         const std::string& part) {
  CellChild spec;
  spec.executable = executable;
  spec.extra = {"--part", part};
  spec.timeout = std::chrono::seconds(env_positive_int("TORCHCONFORM_FRESH_PROCESS_TIMEOUT_S", 300));
  spec.what = "the fresh process running " + ctx.check + " part '" + part + "'";
  const Cell c = run_cell_in_child(spec, ctx).cell;
  if (c.verdict == Verdict::kSkipped) throw SkipCell(c.evidence);
  if (c.verdict == Verdict::kError) throw HarnessError(spec.what + ": " + c.evidence);
  if (c.outcome != Outcome::kPass) throw std::runtime_error("in a fresh process: " + c.evidence);
  return c.metrics.is_object() ? c.metrics : nlohmann::json::object();
}

}  // namespace tc
