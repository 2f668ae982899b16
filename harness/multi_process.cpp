#include "harness/multi_process.h"

#include <cstdlib>

#include "harness/devices.h"
#include "harness/launch.h"
#include "harness/report_json.h"
#include "harness/runner.h"
#include "harness/scratch.h"
#include "harness/util/posix_fs.h"

namespace tc {

bool under_torchrun() { return std::getenv("RANK") != nullptr && std::getenv("WORLD_SIZE") != nullptr; }

int torchrun_rank() {
  const char* r = std::getenv("RANK");
  return r ? std::atoi(r) : 0;
}

CheckResult launch_multi_process_cell(const PlannedCell& planned, const RunPlan& plan, const CheckContext& ctx) {
  const CheckInfo& check = *planned.check;
  if (check.preflight) check.preflight(ctx);  // e.g. the recipe lacks the probe: skipped, nothing launched
  if (plan.executable.empty()) {
    throw HarnessError("check '" + check.name + "' runs as several processes: the runner needs the "
                       "torchconform binary to launch under torchrun (RunPlan::executable)");
  }
  const std::string torchrun = dist_launch::find_torchrun();
  if (torchrun.empty()) {
    throw SkipCell("torchrun not found (set TORCHCONFORM_TORCHRUN, or put the pinned torch's bin/ on PATH)");
  }
  const bool cuda = ctx.device == "cuda";
  const int nproc = cuda ? cuda_device_count() : env_positive_int("TORCHCONFORM_DIST_NPROC", check.ranks);
  const std::string label = ctx.device + "\u00d7" + std::to_string(nproc);
  if (nproc < 2 && planned.recipe->is_variant()) {
    throw SkipCell("'" + ctx.recipe + "' breaks a practice that shows only between ranks, and " + label +
                   " has one rank (on CUDA one rank per GPU: this machine has one)");
  }
  Scratch scratch("torchconform-launch-");
  const std::string child = scratch.file("rank0.json"), log = scratch.file("torchrun.log");
  dist_launch::Spec spec;
  spec.argv = {torchrun, "--standalone", "--nnodes=1", "--nproc-per-node=" + std::to_string(nproc),
               "--max-restarts=0", "--no-python", plan.executable, "run", "--device", ctx.device,
               "--check", check.name, "--recipe", ctx.recipe, "--seed", std::to_string(ctx.seed),
               "--json", child, "--html", "", "--work-dir", scratch.file("out")};
  if (ctx.quick) spec.argv.push_back("--quick");
  if (ctx.sweep) spec.argv.push_back("--sweep");
  spec.log_path = log;
  spec.timeout = std::chrono::seconds(env_positive_int("TORCHCONFORM_DIST_LAUNCH_TIMEOUT_S", 300));
  const dist_launch::Result r = dist_launch::run(spec);
  if (r.timed_out) {
    throw HarnessError("torchrun (" + label + ") did not finish in " +
                       std::to_string(spec.timeout.count() / 1000) + " s and was killed:\n" + dist_launch::tail_of(log));
  }
  Report rep;
  try {
    rep = read_report_file(child);
  } catch (const std::exception&) {
    throw HarnessError("torchrun (" + label + ") exited with " + std::to_string(r.exit_code) +
                       " and rank 0 wrote no report:\n" + dist_launch::tail_of(log));
  }
  for (const Cell& c : rep.cells) {
    if (c.check != check.name || c.recipe != ctx.recipe) continue;
    nlohmann::json metrics = c.metrics.is_object() ? c.metrics : nlohmann::json::object();
    metrics["launch_wall_s"] = r.wall_s;
    metrics["torchrun_exit_code"] = r.exit_code;
    metrics["device_label"] = label;
    if (c.verdict == Verdict::kSkipped) throw SkipCell(c.evidence);
    if (c.verdict == Verdict::kError) throw HarnessError(label + ": " + c.evidence);
    const int expected_exit = (c.verdict == Verdict::kOk) ? 0 : 1;  // rank 0's `run` exit code
    if (r.exit_code != expected_exit) {
      throw HarnessError("rank 0 judged '" + c.evidence.substr(0, 200) + "' but torchrun exited with " +
                         std::to_string(r.exit_code) + ":\n" + dist_launch::tail_of(log));
    }
    return {c.outcome, c.evidence, metrics};
  }
  throw HarnessError("rank 0's report has no " + check.name + " cell for '" + ctx.recipe + "'");
}

}  // namespace tc
