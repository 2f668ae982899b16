// tc_ddp_trainer: the reference's data-parallel training as a program for torchrun, for the fault
// tests (fault_test.cpp). Each rank: process group from torchrun's env, resume from the last
// committed checkpoint in --out if there is one, train to --steps with a checkpoint every epoch,
// rank 0 writes final.json (parameters' digest, where it resumed from).
//
//   torchrun --standalone --nproc-per-node=2 --max-restarts=1 --no-python tc_ddp_trainer
//       --out DIR --steps 12 [--timeout-ms 5000] [--kill-rank 1 --kill-at-step 6 [--kill-signal STOP]]
//       [--stall-rank 2 --stall-s 5]
//   (one command line)
//
// --kill-rank R --kill-at-step K: on the first attempt only, rank R sends itself SIGKILL (or
// SIGSTOP: a hung rank) before step K. Every rank leaves DIR/exit-rank<R>.json (exit code, message,
// time) when it ends by itself; a rank whose collective failed exits 1 naming the lost ranks.
// --stall-rank R --stall-s S: on the first attempt, rank R sleeps S seconds before the kill step
// (alive, busy elsewhere: a survivor that has not yet reached the failing collective).
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "harness/util/atomic_file.h"
#include "harness/util/posix_fs.h"
#include "reference/checkpoint.h"
#include "reference/distributed_run.h"
#include "suites/support/fingerprint.h"

namespace {

using nlohmann::json;
namespace dist = tc::ref::dist;

std::atomic<int> g_sigterm{0};
void on_sigterm(int) { g_sigterm = 1; }

int64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::string digest(const tc::NamedTensors& tensors) { return tc::parameters_digest(tensors); }

struct Args {
  std::string out;
  int64_t steps = 12;
  int64_t timeout_ms = 10000;
  int kill_rank = -1;
  int64_t kill_at_step = -1;
  std::string kill_signal = "KILL";
  int stall_rank = -1;
  double stall_s = 0;
  std::string backend = "gloo";
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(k + " needs a value");
      return argv[++i];
    };
    if (k == "--out") a.out = value();
    else if (k == "--steps") a.steps = std::stoll(value());
    else if (k == "--timeout-ms") a.timeout_ms = std::stoll(value());
    else if (k == "--kill-rank") a.kill_rank = std::stoi(value());
    else if (k == "--kill-at-step") a.kill_at_step = std::stoll(value());
    else if (k == "--kill-signal") a.kill_signal = value();
    else if (k == "--stall-rank") a.stall_rank = std::stoi(value());
    else if (k == "--stall-s") a.stall_s = std::stod(value());
    else if (k == "--backend") a.backend = value();
    else throw std::invalid_argument("unknown argument '" + k + "'");
  }
  if (a.out.empty()) throw std::invalid_argument("--out DIR is required");
  return a;
}

void leave_exit_note(const std::string& out, int rank, int code, const std::string& message) {
  const json j = {{"rank", rank}, {"exit_code", code}, {"message", message}, {"t_ns", realtime_ns()},
                  {"sigterm_received", g_sigterm.load() != 0}};
  tc::write_file_atomically(out + "/exit-rank" + std::to_string(rank) + ".json", j.dump() + "\n");
}

// The steps from where the run is to --steps, a checkpoint every epoch; the rank told to die or to
// stall does so before the kill step (first attempt only).
void train_to(const Args& a, const dist::LaunchEnv& env, tc::ref::DistributedReference& d) {
  const int rank = env.rank;
  const int64_t spe = d.steps_per_epoch();
  while (d.steps_taken() < a.steps) {
    const int64_t step = d.steps_taken();
    if (rank == a.kill_rank && step == a.kill_at_step && env.restart_count == 0) {
      const json k = {{"rank", rank}, {"step", step}, {"signal", a.kill_signal}, {"t_ns", realtime_ns()},
                      {"pid", static_cast<int64_t>(getpid())}};
      tc::write_file_atomically(a.out + "/killed.json", k.dump() + "\n");
      std::cerr << "tc_ddp_trainer: rank " << rank << " sends itself SIG" << a.kill_signal << " before step "
                << step << '\n';
      raise(a.kill_signal == "STOP" ? SIGSTOP : SIGKILL);
    }
    if (rank == a.stall_rank && step == a.kill_at_step && env.restart_count == 0) {
      std::cerr << "tc_ddp_trainer: rank " << rank << " stalls " << a.stall_s << " s before step " << step << '\n';
      std::this_thread::sleep_for(std::chrono::duration<double>(a.stall_s));
    }
    const tc::DistStep r = d.train_step();
    if (std::getenv("TC_TRAINER_VERBOSE")) {
      std::cerr << "rank " << rank << " step " << r.step << " epoch " << r.epoch << " loss " << r.loss
                << " params " << digest(d.parameters()).substr(0, 12) << '\n';
    }
    if ((step + 1) % spe == 0) d.save_checkpoint();
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  try {
    a = parse(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "tc_ddp_trainer: " << e.what() << '\n';
    return 2;
  }
  std::optional<dist::LaunchEnv> env;
  try {
    env = dist::LaunchEnv::from_environment();
  } catch (const std::exception& e) {
    std::cerr << "tc_ddp_trainer: " << e.what() << '\n';
    return 2;
  }
  if (!env) {
    std::cerr << "tc_ddp_trainer: RANK/WORLD_SIZE not set: launch with torchrun --no-python\n";
    return 2;
  }
  // torchrun sends SIGTERM to the other workers when one fails: finish the failing collective and
  // say which rank is lost rather than die silently (torchrun sends SIGKILL 30 s later anyway).
  signal(SIGTERM, on_sigterm);
  const int rank = env->rank;
  try {
    tc::posix_fs::make_dirs(a.out);
    dist::GroupOptions go;
    go.backend = a.backend == "nccl" ? dist::Backend::kNccl : dist::Backend::kGloo;
    go.timeout = std::chrono::milliseconds(a.timeout_ms);
    auto pg = dist::ProcessGroup::create(*env, go);
    const c10::Device device = go.backend == dist::Backend::kNccl
                                   ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(env->local_rank))
                                   : c10::Device(c10::kCPU);
    tc::ref::DistributedReference d;
    d.setup({device, 1234, false, a.out}, *pg);
    const std::string ckpt = a.out + "/checkpoint.pt";
    const bool resuming = tc::posix_fs::exists(ckpt);  // the last committed checkpoint (atomic)
    if (resuming) d.load_checkpoint(ckpt);
    const int64_t resumed_from = d.steps_taken();
    std::cerr << "tc_ddp_trainer: " << env->describe()
              << (resuming ? ", resuming after step " + std::to_string(resumed_from) : std::string(", from scratch"))
              << '\n';
    train_to(a, *env, d);
    if (rank == 0) {
      const json f = {{"params_sha256", digest(d.parameters())}, {"steps", a.steps},
                      {"resumed_from_step", resumed_from}, {"attempt", env->restart_count},
                      {"world_size", env->world_size}};
      tc::write_file_atomically(a.out + "/final.json", f.dump() + "\n");
    }
    pg->barrier();
    leave_exit_note(a.out, rank, 0, "finished");
    return 0;
  } catch (const std::exception& e) {
    std::string msg = e.what();
    msg = msg.substr(0, msg.find('\n'));
    std::cerr << "tc_ddp_trainer: " << msg << '\n';
    try {
      leave_exit_note(a.out, rank, 1, msg);
    } catch (...) {
    }
    return 1;
  }
}
