#include "harness/qualify/qualify.h"

#include <unistd.h>

#include <fstream>
#include <iostream>
#include <stdexcept>

#include "harness/child_process.h"
#include "harness/contract/scratch.h"
#include "harness/devices.h"
#include "harness/multi_process.h"
#include "harness/settings.h"
#include "harness/util/atomic_file.h"
#include "harness/util/text_format.h"

namespace tc::qualify {
namespace {

using nlohmann::json;

// Bad usage or a launch that failed: the CLI's exit 2 with this message.
[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

void validate(const Args& a) {
  if (a.device != "cpu" && a.device != "cuda") fail("--device: cpu or cuda, not '" + a.device + "'");
  if (a.nproc < 0) fail("--nproc must be positive");
  if (a.repetitions < 1) fail("--reps must be at least 1");
  if (!(a.bounds.k > 0.0)) fail("--k must be positive");
  if (!(a.bounds.floor > 0.0 && a.bounds.floor < 1.0)) fail("--floor: a percentage between 0% and 100%");
}

// Rank 0 under a launch of ours: the gathered figures, for the launcher to judge.
void write_raw(const std::vector<RankResult>& ranks, const std::string& path) {
  json arr = json::array();
  for (const RankResult& r : ranks) arr.push_back(to_json(r));
  write_file_atomically(path, arr.dump() + "\n");
}

std::vector<RankResult> read_raw(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("no figures at " + path);
  const json arr = json::parse(in);
  std::vector<RankResult> out;
  for (const json& j : arr) out.push_back(rank_result_from_json(j));
  return out;
}

int report_and_exit(Report rep, const Args& a) {
  rep.assessment = assess(rep.ranks, rep.bounds);
  std::cout << render_text(rep);
  if (!a.json_path.empty()) {
    write_file_atomically(a.json_path, report_json(rep).dump(2) + "\n");
    std::cerr << "torchconform: wrote " << a.json_path << '\n';
  }
  if (!a.html_path.empty()) {
    write_file_atomically(a.html_path, render_html(rep));
    std::cerr << "torchconform: wrote " << a.html_path << '\n';
  }
  return rep.exit_code();
}

// Under torchrun: this rank's share. Rank 0 judges (or hands the figures to our launcher).
int as_worker(const Args& a, const json& header) {
  const Worker* w = worker();
  if (w == nullptr) fail("this binary has no qualification probes (suites/qualify_probes is not linked in)");
  WorkerOptions o;
  o.device = a.device;
  o.repetitions = a.repetitions;
  std::vector<RankResult> ranks;
  try {
    ranks = (*w)(o);
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  } catch (const std::exception& e) {
    fail(std::string("rank ") + std::to_string(torchrun_rank()) + ": a probe failed: " + e.what());
  }
  if (torchrun_rank() != 0) return 0;
  if (!a.raw_path.empty()) {
    write_raw(ranks, a.raw_path);
    return 0;
  }
  return report_and_exit({header, ranks, a.bounds, {}}, a);
}

}  // namespace

int run_command(const Args& a, const json& header, const std::string& self) {
  validate(a);
  if (under_torchrun()) return as_worker(a, header);
  if (worker() == nullptr) fail("this binary has no qualification probes (suites/qualify_probes is not linked in)");

  int nproc = a.nproc;
  if (a.device == "cuda") {
    const int gpus = cuda_available() ? cuda_device_count() : 0;
    if (gpus == 0) fail("--device cuda: no CUDA device on this machine");
    if (nproc == 0) nproc = gpus;
    if (nproc > gpus) fail("--nproc " + std::to_string(nproc) + ": this machine has " + std::to_string(gpus) + " GPU(s)");
  } else if (nproc == 0) {
    nproc = env_positive_int("TORCHCONFORM_DIST_NPROC", 2);
  }
  if (a.device == "cpu") {
    // More ranks than cores: ranks share cores (or a core's hyperthreads), and which ones do is up
    // to the scheduler; measured here, 4 ranks on 2 cores once split 2 against 2, 30% apart with no
    // rank slowed, right at the floor. Not an error (it is how this is tested on small machines).
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores > 0 && nproc > cores) {
      std::cerr << "torchconform: qualify: warning: " << nproc << " CPU ranks on " << cores
                << " online core(s): ranks share cores, so their figures also measure how the scheduler "
                   "placed them; a flag is more likely a placement than a slow device\n";
    }
  }
  const std::string torchrun = child::find_torchrun();
  if (torchrun.empty()) fail("torchrun not found (set TORCHCONFORM_TORCHRUN, or put the pinned torch's bin/ on PATH)");
  if (self.empty()) fail("cannot find this binary to launch under torchrun");

  Scratch scratch("torchconform-qualify-");
  const std::string raw = scratch.file("ranks.json"), log = scratch.file("torchrun.log");
  child::Spec spec;
  spec.argv = {torchrun, "--standalone", "--nnodes=1", "--nproc-per-node=" + std::to_string(nproc),
               "--max-restarts=0", "--log-dir=" + scratch.file("torchelastic"),  // torchrun's own, removed with it
               "--no-python", self, "qualify", "--device", a.device, "--reps", std::to_string(a.repetitions), "--raw", raw};
  spec.log_path = log;
  const int timeout_s = a.timeout_s > 0 ? a.timeout_s : env_positive_int("TORCHCONFORM_QUALIFY_TIMEOUT_S", 300);
  spec.timeout = std::chrono::seconds(timeout_s);
  std::cerr << "torchconform: qualify: " << nproc << " " << a.device << " rank(s) under torchrun, "
            << a.repetitions << " repetitions a probe, bound max(" << a.bounds.k << " x 1.4826 x MAD, "
            << fmt::pct(a.bounds.floor) << ")\n";
  const child::Result r = child::run(spec);
  if (r.timed_out) {
    fail("torchrun did not finish in " + std::to_string(timeout_s) + " s and was killed:\n" + child::tail_of(log));
  }
  if (r.exit_code != 0) {
    fail("torchrun exited with " + std::to_string(r.exit_code) + ":\n" + child::tail_of(log));
  }
  std::vector<RankResult> ranks;
  try {
    ranks = read_raw(raw);
  } catch (const std::exception& e) {
    fail(std::string("rank 0 wrote no figures (") + e.what() + "):\n" + child::tail_of(log));
  }
  if (static_cast<int>(ranks.size()) != nproc) {
    fail("rank 0 gathered " + std::to_string(ranks.size()) + " ranks of " + std::to_string(nproc));
  }
  json h = header;
  h["run"]["launch_wall_s"] = r.wall_s;
  return report_and_exit({h, ranks, a.bounds, {}}, a);
}

}  // namespace tc::qualify
