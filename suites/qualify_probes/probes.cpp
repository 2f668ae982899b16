// The probes of `torchconform qualify` (harness/contract/qualify_probe.h): what every rank measures
// on its device, in lockstep with the others (a barrier before each repetition of each probe, so
// every rank measures while the others do the same work):
//
//   matmul     TFLOP/s in the device's fast dtype. CUDA: bf16 (TF32 is irrelevant to bf16 and is
//              stated as found). CPU: fp32 on ONE thread per rank: the ranks share the host's cores,
//              and one thread each makes every rank's figure the speed of the core it runs on rather
//              than a share of a thread pool the others also use; fp32 because bf16 is fast only on
//              CPUs with AMX/avx512_bf16 (and slower than fp32 on others: amp's CPU bar is measured, docs/amp.md).
//   copy       GB/s of a large tensor copy on the device, counted as STREAM does (read + write).
//   h2d        GB/s host to device from pinned memory (CUDA only).
//   allreduce  bus bandwidth of a float32 sum, busbw = algbw * 2(n-1)/n as nccl-tests and
//              tc_allreduce_bench report it (Gloo on the CPU, NCCL on GPUs).
//   fingerprint  a few training steps of the reference model (reference/model.h) from the same seed
//              on every rank: each step's loss bits and the sha256 of the final parameters.
//
// Test hooks (docs/qualify.md), for showing that a slow or wrong device is named:
//   TORCHCONFORM_QUALIFY_SLOW_RANK=R  TORCHCONFORM_QUALIFY_SLOWDOWN=F (default 2)
//       inside the timed region of every timed probe, rank R spends (F - 1) times what the work
//       took again (burning CPU for the probes timed in CPU time, sleeping for the others), so its
//       figures read 1/F of what the device did;
//   TORCHCONFORM_QUALIFY_PERTURB_RANK=R  rank R trains its fingerprint from another seed.
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "harness/contract/cuda_support.h"

#include "harness/contract/qualify_probe.h"
#include "harness/util/statistics.h"
#include "reference/distributed.h"
#include "reference/model.h"
#include "suites/support/fingerprint.h"

namespace tc::qualify {
namespace {

namespace dist = tc::ref::dist;
using Clock = std::chrono::steady_clock;

// An environment variable as a number; `fallback` when unset; std::invalid_argument when it is not
// one (bad usage: the CLI exits 2 naming it).
double env_number(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  if (end == v || *end != '\0') throw std::invalid_argument(std::string(name) + "='" + v + "' is not a number");
  return d;
}

struct Hooks {
  int slow_rank = -1;
  double slowdown = 1.0;
  int perturb_rank = -1;

  static Hooks from_environment() {
    Hooks h;
    h.slow_rank = static_cast<int>(env_number("TORCHCONFORM_QUALIFY_SLOW_RANK", -1));
    h.slowdown = env_number("TORCHCONFORM_QUALIFY_SLOWDOWN", 2.0);
    if (h.slowdown < 1.0) throw std::invalid_argument("TORCHCONFORM_QUALIFY_SLOWDOWN must be at least 1");
    h.perturb_rank = static_cast<int>(env_number("TORCHCONFORM_QUALIFY_PERTURB_RANK", -1));
    return h;
  }
};

struct Probe {
  dist::ProcessGroup& pg;
  c10::Device device;
  int repetitions;
  bool slowed;  // this rank is the hook's slow rank
  double slowdown;

  void sync() const {
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
  }

  // Seconds of `work` (device work completed), with the hook's slow-down inside the timed region.
  // Clock: CPU compute probes (matmul, copy on the CPU) take this thread's CPU time, everything
  // else wall time. Ranks that share cores with each other (4 ranks on 2 cores) or with other jobs
  // are descheduled for part of the wall time, and a wall-clock figure would measure that sharing
  // (measured: healthy ranks' matmul 30-50% apart), not the core; the thread's CPU time is the
  // time a core spent on the work (1 intra-op thread, so the work runs on this thread).
  template <typename F>
  double timed(bool cpu_time, F&& work) const {
    sync();
    const double t0 = now(cpu_time);
    work();
    sync();
    if (slowed) {
      // The hook: a CPU-time probe burns CPU (sleeping costs none), a wall-time probe sleeps.
      const double extra = (slowdown - 1.0) * (now(cpu_time) - t0);
      if (cpu_time) {
        const double until = now(true) + extra;
        volatile double sink = 0.0;
        while (now(true) < until) {
          for (int i = 0; i < 1000; ++i) sink = sink + 1.0;
        }
      } else {
        std::this_thread::sleep_for(std::chrono::duration<double>(extra));
      }
    }
    return now(cpu_time) - t0;
  }

  static double now(bool cpu_time) {
    if (cpu_time) {
      timespec ts{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
      return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
    }
    return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  }

  // One warm-up, then `repetitions` measurements, each after a barrier; rate = amount / seconds.
  template <typename F>
  Figure measure(const std::string& name, const std::string& unit, double amount, std::string detail, bool cpu_time,
                 F&& work) const {
    pg.barrier();
    work();  // warm-up: allocations, kernels chosen, caches filled
    Figure f{name, unit, {}, 0.0, std::move(detail)};
    for (int r = 0; r < repetitions; ++r) {
      pg.barrier();
      f.samples.push_back(amount / timed(cpu_time, work));
    }
    f.median = stats::median(f.samples);
    return f;
  }
};

Figure matmul(const Probe& p) {
  const bool cuda = p.device.is_cuda();
  const int64_t n = cuda ? 8192 : 512;
  const int iters = cuda ? 20 : 8;
  const auto dtype = cuda ? torch::kBFloat16 : torch::kFloat;
  auto opts = torch::TensorOptions().dtype(dtype).device(p.device);
  at::Generator g = at::detail::createCPUGenerator(7);
  const at::Tensor a = torch::randn({n, n}, g, torch::kFloat).to(opts);
  const at::Tensor b = torch::randn({n, n}, g, torch::kFloat).to(opts);
  at::Tensor c = torch::empty({n, n}, opts);
  std::string detail = (cuda ? "bf16 " : "fp32 ") + std::to_string(n) + "x" + std::to_string(n) + " matmul x" +
                       std::to_string(iters);
  if (cuda) {
    detail += std::string(", TF32 for fp32 matmul ") + (at::globalContext().allowTF32CuBLAS() ? "on" : "off") +
              " (not used by bf16)";
  } else {
    detail += ", " + std::to_string(at::get_num_threads()) + " thread(s) per rank";
  }
  const double flop = 2.0 * static_cast<double>(n) * n * n * iters;
  if (!cuda) detail += ", timed in the rank's thread CPU time";
  return p.measure("matmul", "TFLOP/s", flop / 1e12, detail, /*cpu_time=*/!cuda, [&] {
    for (int i = 0; i < iters; ++i) at::mm_out(c, a, b);
  });
}

Figure copy(const Probe& p) {
  const bool cuda = p.device.is_cuda();
  const int64_t bytes = cuda ? (int64_t{1} << 30) : (int64_t{64} << 20);
  const int iters = cuda ? 10 : 4;
  auto opts = torch::TensorOptions().dtype(torch::kFloat).device(p.device);
  const at::Tensor src = torch::ones({bytes / 4}, opts);
  at::Tensor dst = torch::empty({bytes / 4}, opts);
  const double moved = 2.0 * static_cast<double>(bytes) * iters;  // read + write
  return p.measure("copy", "GB/s", moved / 1e9,
                   std::to_string(bytes >> 20) + " MiB tensor copy x" + std::to_string(iters) +
                       ", read + write counted" + (cuda ? "" : ", timed in the rank's thread CPU time"),
                   /*cpu_time=*/!cuda, [&] {
                     for (int i = 0; i < iters; ++i) dst.copy_(src);
                   });
}

Figure h2d(const Probe& p) {
  const int64_t bytes = int64_t{256} << 20;
  const int iters = 10;
  const at::Tensor host = torch::ones({bytes / 4}, torch::kFloat).pin_memory();
  at::Tensor dev = torch::empty({bytes / 4}, torch::TensorOptions().dtype(torch::kFloat).device(p.device));
  return p.measure("h2d", "GB/s", static_cast<double>(bytes) * iters / 1e9,
                   "256 MiB pinned host -> device x" + std::to_string(iters), /*cpu_time=*/false, [&] {
                     for (int i = 0; i < iters; ++i) dev.copy_(host, /*non_blocking=*/true);
                   });
}

Figure allreduce(const Probe& p) {
  const bool cuda = p.device.is_cuda();
  const int64_t bytes = cuda ? (int64_t{256} << 20) : (int64_t{4} << 20);
  const int iters = cuda ? 10 : 4;
  const int n = p.pg.size();
  std::vector<at::Tensor> t{torch::zeros({bytes / 4}, torch::TensorOptions().dtype(torch::kFloat).device(p.device))};
  const double algbw_amount = static_cast<double>(bytes) * iters / 1e9;
  return p.measure("allreduce", "GB/s", algbw_amount * 2.0 * (n - 1) / n,
                   "busbw of a " + std::to_string(bytes >> 20) + " MiB float32 sum x" + std::to_string(iters) + " (" +
                       std::string(cuda ? "NCCL" : "Gloo") + ", " + std::to_string(n) + " ranks)",
                   /*cpu_time=*/false, [&] {
                     for (int i = 0; i < iters; ++i) p.pg.allreduce_sum(t);
                   });
}

// The reference model trained a few steps from `seed` on the device, deterministic algorithms on.
Fingerprint fingerprint(c10::Device device, uint64_t seed) {
  auto& ctx = at::globalContext();
  ctx.setDeterministicAlgorithms(true, /*warn_only=*/true);
  ctx.setDeterministicCuDNN(true);
  ctx.setBenchmarkCuDNN(false);
  torch::manual_seed(seed);
  ref::ImageClassifier model(10, 16);
  ref::init_weights(*model);
  model->to(device);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  at::Generator g = at::detail::createCPUGenerator(seed);
  std::vector<double> losses;
  for (int step = 0; step < 5; ++step) {
    const at::Tensor x = torch::randn({8, 3, 16, 16}, g, torch::kFloat).to(device);  // (B, 3, H, W)
    const at::Tensor y = torch::randint(0, 10, {8}, g, torch::kLong).to(device);    // (B,)
    opt.zero_grad();
    const at::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    loss.backward();
    opt.step();
    losses.push_back(loss.item<float>());  // exact in double: the float's bits survive in loss_hex
  }
  NamedTensors params;
  for (const auto& p : model->named_parameters()) params.emplace_back(p.key(), p.value());
  ctx.setDeterministicAlgorithms(false, false);
  Fingerprint fp;
  fp.record = training_fingerprint("5 SGD steps of the reference model from seed " + std::to_string(seed), losses, params);
  return fp;
}

std::string hostname() {
  char h[256] = {0};
  gethostname(h, sizeof h - 1);
  return h;
}

// "cores 0-3,6 of 8": the cores this process may run on (its affinity).
std::string cpu_identity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "cores unknown";
  std::string out;
  const int total = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    int e = c;
    while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, &set)) ++e;
    // Appended piece by piece: GCC 12 warned (-Wstringop-overflow, a false positive) on the
    // temporaries of one concatenated expression.
    if (!out.empty()) out += ',';
    out += std::to_string(c);
    if (e > c) {
      out += '-';
      out += std::to_string(e);
    }
    c = e;
  }
  return "cores " + out + " of " + std::to_string(total);
}

std::string cuda_identity(int index) {
  const cuda_support::Api* cuda = cuda_support::api();
  cuda_support::DeviceInfo d;
  if (cuda == nullptr || !cuda->device_info(index, &d)) return "cuda:" + std::to_string(index);
  return d.name + ", " + d.uuid + ", PCI " + d.pci_bus;
}

std::vector<RankResult> run_worker(const WorkerOptions& o) {
  const Hooks hooks = Hooks::from_environment();
  const auto env = dist::LaunchEnv::from_environment();
  if (!env) throw std::invalid_argument("RANK/WORLD_SIZE not set: qualify's worker runs under torchrun");
  const bool cuda = o.device == "cuda";
  if (cuda) {
    if (!torch::cuda::is_available()) throw std::invalid_argument("--device cuda: no CUDA device here");
    setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 0);  // before the first cuBLAS call (fingerprint)
  } else {
    at::set_num_threads(1);  // why: see the header
  }
  const c10::Device device = cuda ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(env->local_rank))
                                  : c10::Device(c10::kCPU);
  const auto pg = dist::ProcessGroup::create(
      *env, {cuda ? dist::Backend::kNccl : dist::Backend::kGloo, std::chrono::milliseconds(o.timeout_ms)});

  RankResult r;
  r.rank = pg->rank();
  r.host = hostname();
  r.device = device.str();
  r.device_id = cuda ? cuda_identity(env->local_rank) : cpu_identity();
  const bool slowed = hooks.slow_rank == r.rank && hooks.slowdown > 1.0;
  if (slowed) {
    r.notes.push_back("slowed by the test hook: TORCHCONFORM_QUALIFY_SLOWDOWN=" + std::to_string(hooks.slowdown));
  }
  const Probe p{*pg, device, o.repetitions, slowed, hooks.slowdown};
  r.figures.push_back(matmul(p));
  r.figures.push_back(copy(p));
  if (cuda) r.figures.push_back(h2d(p));
  if (pg->size() > 1) r.figures.push_back(allreduce(p));
  const bool perturbed = hooks.perturb_rank == r.rank;
  if (perturbed) r.notes.push_back("fingerprint perturbed by the test hook (another seed)");
  pg->barrier();
  r.fingerprint = fingerprint(device, perturbed ? 1235 : 1234);

  // Rank 0 gathers every rank's result through the group's store.
  pg->store_set("qualify/result/" + std::to_string(r.rank), to_json(r).dump());
  pg->barrier();
  std::vector<RankResult> all;
  if (r.rank == 0) {
    for (int i = 0; i < pg->size(); ++i) {
      all.push_back(i == 0 ? r : rank_result_from_json(nlohmann::json::parse(pg->store_get("qualify/result/" + std::to_string(i)))));
    }
  }
  pg->barrier();  // nobody leaves (taking a store down) before rank 0 has read
  return all;
}

const bool registered = set_worker(run_worker);

}  // namespace
}  // namespace tc::qualify
