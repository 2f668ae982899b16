#include "harness/multi_process.h"

#include <cstdlib>

#include "harness/cell_in_child.h"
#include "harness/child_process.h"
#include "harness/contract/scratch.h"
#include "harness/devices.h"
#include "harness/rank_server.h"
#include "harness/run_plan.h"
#include "harness/settings.h"
#include "harness/util/posix_fs.h"

namespace tc {

bool under_torchrun() { return std::getenv("RANK") != nullptr && std::getenv("WORLD_SIZE") != nullptr; }

int torchrun_rank() {
  const char* r = std::getenv("RANK");
  return r ? std::atoi(r) : 0;
}

namespace {
int env_int_or(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}
}  // namespace

World world_for(const CheckInfo& check, const std::string& device) {
  World w;
  if (under_torchrun()) {
    w.rank = torchrun_rank();
    w.size = env_int_or("WORLD_SIZE", 1);
    w.local_size = env_int_or("LOCAL_WORLD_SIZE", w.size);
  } else {
    w.size = device == "cuda" ? cuda_device_count() : env_positive_int("TORCHCONFORM_DIST_NPROC", check.ranks);
    w.local_size = w.size;
  }
  w.label = device + "\u00d7" + std::to_string(w.size);
  return w;
}

CheckResult launch_multi_process_cell(const PlannedCell& planned, const RunPlan& plan, const CheckContext& ctx) {
  const CheckInfo& check = *planned.check;
  if (check.preflight) check.preflight(ctx);  // e.g. the recipe lacks the probe: skipped, nothing launched
  if (plan.executable.empty()) {
    throw HarnessError("check '" + check.name + "' runs as several processes: the runner needs the "
                       "torchconform binary to launch under torchrun (RunPlan::executable)");
  }
  const std::string torchrun = child::find_torchrun();
  if (torchrun.empty()) {
    throw SkipCell("torchrun not found (set TORCHCONFORM_TORCHRUN, or put the pinned torch's bin/ on PATH)");
  }
  const int nproc = ctx.world.size;
  const std::string& label = ctx.world.label;
  Scratch work("torchconform-ranks-");  // the directory every rank of this cell shares
  CellChild spec;
  // --log-dir: torchrun's own directory (each rank's error file) in the cell's, removed with it; left to
  // itself torchrun makes a /tmp/torchelastic_* per launch and never removes it.
  spec.launcher = {torchrun, "--standalone", "--nnodes=1", "--nproc-per-node=" + std::to_string(nproc),
                   "--max-restarts=0", "--log-dir=" + work.file("torchelastic"), "--no-python"};
  // Each rank forked from the run's template where there is one (harness/rank_server.h), else by exec.
  const std::vector<std::string> forked = rank_server::launcher_prefix(ctx.device, plan.executable);
  spec.launcher.insert(spec.launcher.end(), forked.begin(), forked.end());
  spec.executable = plan.executable;
  spec.extra = {"--work-dir", work.file("out")};
  spec.timeout = std::chrono::seconds(env_positive_int("TORCHCONFORM_DIST_LAUNCH_TIMEOUT_S", 300));
  spec.what = "torchrun (" + label + ")";
  spec.torchrun_in_fork = !forked.empty();  // with the ranks: `--recipe-processes exec` starts both by exec
  const CellFromChild got = run_cell_in_child(spec, ctx);
  const Cell& c = got.cell;
  nlohmann::json metrics = c.metrics.is_object() ? c.metrics : nlohmann::json::object();
  metrics["launch_wall_s"] = got.exit.wall_s;
  metrics["torchrun_exit_code"] = got.exit.exit_code;
  metrics["ranks_started_by"] = forked.empty() ? "exec" : "fork";
  if (c.verdict == Verdict::kSkipped) throw SkipCell(c.evidence);
  if (c.verdict == Verdict::kError) throw HarnessError(label + ": " + c.evidence);
  const int expected_exit = (c.verdict == Verdict::kOk) ? 0 : 1;  // rank 0's `run` exit code
  if (got.exit.exit_code != expected_exit) {
    throw HarnessError("rank 0 judged '" + c.evidence.substr(0, 200) + "' but torchrun exited with " +
                       std::to_string(got.exit.exit_code) + ":\n" + got.log_tail);
  }
  return {c.outcome, c.evidence, metrics};
}

}  // namespace tc
