#include "suites/amp/throughput.h"

#include "harness/util/text_format.h"
#include "suites/amp/dtype.h"

#include <time.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#ifdef TC_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include "harness/util/median_interval.h"
#include "reference/reference_run.h"
#include "suites/support/tensor_compare.h"

namespace tc::amp {

WorkloadSize workload_size(const c10::Device& device) {
  WorkloadSize s;
  if (device.is_cuda()) {
    s.batch = 32;
    s.seq = 512;
    s.dim = 1024;
    s.heads = 16;
    s.ff = 4096;
  }
  return s;
}

ref::TransformerOptions transformer_options(const WorkloadSize& s) {
  ref::TransformerOptions o;
  o.dim = s.dim;
  o.heads = s.heads;
  o.ff = s.ff;
  o.seq = s.seq;
  o.classes = s.classes;
  return o;
}

double step_flops(const WorkloadSize& s) {
  const double tokens = static_cast<double>(s.batch) * s.seq, d = s.dim, f = s.ff;
  const double embed = 2 * tokens * d * d;
  const double linears = embed + 2 * tokens * d * 3 * d /*qkv*/ + 2 * tokens * d * d /*proj*/ + 2 * 2 * tokens * d * f /*mlp*/ +
                         2.0 * s.batch * d * s.classes /*head*/;
  const double attention = 2 * 2 * tokens * s.seq * d;  // Q K^T and P V
  const double forward = linears + attention;
  return forward + (2 * forward - embed);  // backward: input and weight gradients, none for the input
}

AmpWorkload make_workload(const WorkloadSize& s, const c10::Device& device, uint64_t seed) {
  torch::manual_seed(seed);
  ref::TransformerBlock block(transformer_options(s));
  block->to(device);
  block->train();
  AmpWorkload w;
  w.model = block.ptr();
  w.forward = [block](const at::Tensor& x) mutable { return block->forward(x); };
  w.input = torch::randn({s.batch, s.seq, s.dim}).to(device);               // (B, T, D)
  w.target = torch::randint(0, s.classes, {s.batch}, torch::kLong).to(device);  // (B)
  return w;
}

std::vector<std::string> cpu_precision_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::vector<std::string> out;
    std::string w;
    while (words >> w) {
      if (w == "amx_bf16" || w == "amx_tile" || w == "amx_fp16" || w == "avx512_bf16" || w == "avx512_fp16" ||
          w == "avx512f") {
        out.push_back(w);
      }
    }
    return out;
  }
  return {};
}

namespace {

// Single-threaded CPU kernels while timing (a shared machine's other cores come and go); on CUDA,
// fp32 matmuls without TF32, so "fp32" is fp32. Both restored after.
struct TimingScope {
  bool cuda;
  int threads = at::get_num_threads();
  bool tf32_cublas = false, tf32_cudnn = false;
  explicit TimingScope(bool on_cuda) : cuda(on_cuda) {
    if (cuda) {
      tf32_cublas = at::globalContext().allowTF32CuBLAS();
      tf32_cudnn = at::globalContext().allowTF32CuDNN();
      at::globalContext().setAllowTF32CuBLAS(false);
      at::globalContext().setAllowTF32CuDNN(false);
    } else {
      at::set_num_threads(1);
    }
  }
  ~TimingScope() {
    if (cuda) {
      at::globalContext().setAllowTF32CuBLAS(tf32_cublas);
      at::globalContext().setAllowTF32CuDNN(tf32_cudnn);
    } else {
      at::set_num_threads(threads);
    }
  }
};

// The calling thread's CPU time: on the CPU the steps run with 1 intra-op thread, on this thread,
// so its CPU time is the step's work alone, whatever else the machine runs (wall time on a loaded
// 2-core machine swung the reference's own ratio 0.8..1.27 and left it undecided after 60 s).
double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// One step's time: wall time on CUDA (the device works while the host waits), the thread's CPU time
// on the CPU.
double seconds(const std::function<double()>& step, bool cuda) {
  if (!cuda) {
    const double c0 = thread_cpu_s();
    step();
    return thread_cpu_s() - c0;
  }
  const auto t0 = std::chrono::steady_clock::now();
  step();  // returns the loss read: the device has finished
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Where the dtype's speed-up over fp32 is judged, and the bar; "" where not, with why in `why`.
double speedup_bar(const CheckContext& ctx, c10::ScalarType dtype, std::string& hardware, std::string& why) {
  if (ctx.device == "cuda") {
#ifdef TC_WITH_CUDA
    const cudaDeviceProp* p = at::cuda::getCurrentDeviceProperties();
    hardware = std::string(p->name) + ", compute capability " + std::to_string(p->major) + "." + std::to_string(p->minor);
    if (dtype == c10::kBFloat16 && p->major < 8) {
      why = "bf16 has no tensor-core support below compute capability 8.0";
      return 0.0;
    }
#else
    hardware = "CUDA device";
#endif
    return 2.0;  // fp16 / bf16 on tensor cores against fp32 without TF32
  }
  const std::vector<std::string> flags = cpu_precision_flags();
  hardware = "CPU flags:";
  for (const auto& f : flags) hardware += " " + f;
  if (flags.empty()) hardware += " none of amx_bf16/amx_tile/amx_fp16/avx512_bf16/avx512_fp16/avx512f";
  auto has = [&](const char* f) { return std::find(flags.begin(), flags.end(), f) != flags.end(); };
  if (dtype == c10::kBFloat16 && has("amx_bf16") && has("amx_tile")) return 1.25;
  why = dtype == c10::kBFloat16
            ? (has("avx512_bf16") ? "avx512_bf16 without AMX: bf16 matmuls are not reliably faster than fp32 (1.8x slower on "
                                    "one such machine, 1.47x faster on another)"
                                  : "no AMX and no avx512_bf16: bf16 matmuls are emulated")
            : "fp16 on a CPU is not judged";
  return 0.0;
}

nlohmann::json figures(const stats::MedianInterval& m) {
  return {{"median", m.median}, {"ci95_low", m.has_interval ? nlohmann::json(m.lo) : nlohmann::json()},
          {"ci95_high", m.has_interval ? nlohmann::json(m.hi) : nlohmann::json()}, {"coverage", m.coverage},
          {"rounds", m.n}};
}

std::string text(const stats::MedianInterval& m) {
  std::string s = fmt::sig(m.median, 3) + "x (median of " + std::to_string(m.n) + " rounds";
  if (m.has_interval) {
    s += ", " + fmt::sig(100 * m.coverage, 3) + "% interval " + fmt::sig(m.lo, 3) + ".." + fmt::sig(m.hi, 3);
  }
  return s + ")";
}

}  // namespace

std::string throughput(const CheckContext& ctx, AmpProbe& recipe, c10::ScalarType dtype, Findings& out,
                       double bar_given) {
  const bool cuda = ctx.device == "cuda";
  const c10::Device device = cuda ? c10::Device(c10::kCUDA) : c10::Device(c10::kCPU);
  const std::string d = dtype_name(dtype);
  const WorkloadSize size = workload_size(device);
  const uint64_t seed = static_cast<uint64_t>(ctx.seed) + 101;
  std::function<double()> mine = recipe.amp_step_on(make_workload(size, device, seed));
  if (!mine) {
    out.recorded("amp_procedure_speed", d + " AMP procedure speed: not measured (the recipe's AmpProbe::amp_step_on offers "
                                        "no way to apply its procedure to the transformer workload: a recipe whose train_step is its own, "
                                        "not ReferenceRun's, implements amp_step_on)");
    return "";
  }
  ref::ReferenceRun ref_amp, ref_fp32;
  AmpOptions o;
  o.dtype = dtype;
  ref_amp.set_amp(o);
  ref_amp.setup(run_options(ctx, ctx.seed));
  ref_fp32.setup(run_options(ctx, ctx.seed));
  std::function<double()> theirs = ref_amp.amp_step_on(make_workload(size, device, seed));
  std::function<double()> fp32 = ref_fp32.amp_step_on(make_workload(size, device, seed));

  std::string hardware, why;
  double bar = speedup_bar(ctx, dtype, hardware, why);
  if (bar_given > 0) {
    bar = bar_given;
    hardware += " (the bar given by the caller, not read from them)";
  }
  constexpr double kProcedureBar = 0.8;
  const double budget_s = cuda ? 20.0 : 60.0;
  const int min_rounds = 6, max_rounds = 60;

  TimingScope timing(cuda);
  const auto start = std::chrono::steady_clock::now();
  fp32();  // warm-up: allocations, kernel selection, the autocast paths
  theirs();
  mine();
  std::vector<double> tf, tr, tm, procedure, speedup;
  stats::MedianInterval proc_m, speed_m;
  stats::BarVerdict proc_v = stats::BarVerdict::kUndecided, speed_v = stats::BarVerdict::kUndecided;
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  while (true) {
    const int r = static_cast<int>(tm.size());
    double a, b, c;
    if (r % 2 == 0) {
      a = seconds(fp32, cuda), b = seconds(theirs, cuda), c = seconds(mine, cuda);
    } else {
      c = seconds(mine, cuda), b = seconds(theirs, cuda), a = seconds(fp32, cuda);
    }
    tf.push_back(a), tr.push_back(b), tm.push_back(c);
    procedure.push_back(b / c);
    speedup.push_back(a / c);
    const int n = r + 1;
    if (n < min_rounds || n % 2 == 1) continue;
    proc_m = stats::median_interval(procedure);
    speed_m = stats::median_interval(speedup);
    proc_v = stats::judge_at_least(proc_m, kProcedureBar);
    speed_v = bar > 0 ? stats::judge_at_least(speed_m, bar) : stats::BarVerdict::kPass;
    const bool decided = proc_v != stats::BarVerdict::kUndecided && speed_v != stats::BarVerdict::kUndecided;
    if (decided || n >= max_rounds || elapsed() > budget_s) break;
  }
  const double wall = elapsed();
  const stats::MedianInterval ref_speed = stats::median_interval([&] {
    std::vector<double> v;
    for (size_t i = 0; i < tf.size(); ++i) v.push_back(tf[i] / tr[i]);
    return v;
  }());
  const double flops = step_flops(size);
  const std::string workload = "transformer block " + std::to_string(size.batch) + "x" + std::to_string(size.seq) +
                               " tokens, width " + std::to_string(size.dim) + ", MLP " + std::to_string(size.ff) + " (" +
                               fmt::sig(flops / 1e9, 4) + " GFLOP/step), " +
                               (cuda ? "TF32 off" : "1 thread, its CPU time") + ": fp32 step " +
                               fmt::sig(1e3 * stats::median_interval(tf).median, 4) + " ms, reference " + d + " step " +
                               fmt::sig(1e3 * stats::median_interval(tr).median, 4) + " ms, recipe's " + d + " step " +
                               fmt::sig(1e3 * stats::median_interval(tm).median, 4) + " ms";
  out.metrics()["throughput_" + d] = {
      {"workload", {{"batch", size.batch}, {"seq", size.seq}, {"dim", size.dim}, {"heads", size.heads}, {"ff", size.ff},
                    {"flops_per_step", flops}}},
      {"hardware", hardware},
      {"fp32_step_s", tf},
      {"reference_amp_step_s", tr},
      {"recipe_amp_step_s", tm},
      {"procedure_ratio", figures(proc_m)},
      {"procedure_bar", kProcedureBar},
      {"speedup_over_fp32", figures(speed_m)},
      {"reference_speedup_over_fp32", figures(ref_speed)},
      {"speedup_bar", bar > 0 ? nlohmann::json(bar) : nlohmann::json()},
      {"speedup_judged", bar > 0},
      {"not_judged_because", why},
      {"wall_s", wall}};

  std::vector<std::string> noisy;
  // The recipe's AMP procedure against the reference's, on the same workload and hardware.
  const std::string proc = d + " AMP procedure speed on the " + workload + ": recipe / reference throughput " +
                           text(proc_m) + ", bar " + fmt::sig(kProcedureBar, 3);
  if (proc_v == stats::BarVerdict::kPass) {
    out.held("amp_procedure_speed", proc);
  } else if (proc_v == stats::BarVerdict::kFail) {
    out.broken("amp_procedure_speed", proc + ": the recipe's mixed-precision step is slower than the reference's");
  } else {
    noisy.push_back(proc);
  }
  // The speed-up over fp32: judged where the hardware accelerates the dtype.
  const std::string sp = d + " throughput / fp32 on the " + workload + ": " + text(speed_m) + " (the reference's " +
                         text(ref_speed) + "; " + hardware + ")";
  if (bar <= 0) {
    out.recorded("throughput", sp + ": recorded, not judged here (" + why + ")");
  } else if (speed_v == stats::BarVerdict::kPass) {
    out.held("throughput", sp + ", bar " + fmt::sig(bar, 3));
  } else if (speed_v == stats::BarVerdict::kFail) {
    out.broken("throughput", sp + ", bar " + fmt::sig(bar, 3) + ": mixed precision does not speed the step up");
  } else {
    noisy.push_back(sp + ", bar " + fmt::sig(bar, 3));
  }
  if (noisy.empty()) return "";
  std::string s = "too noisy to judge after " + std::to_string(tm.size()) + " rounds in " + fmt::sig(wall, 3) + " s: ";
  for (size_t i = 0; i < noisy.size(); ++i) s += (i ? "; " : "") + noisy[i];
  for (const std::string& n : noisy) out.recorded(n.find("procedure") != std::string::npos ? "amp_procedure_speed" : "throughput",
                                                  n + ": undecided (interval across the bar)");
  return s;
}

}  // namespace tc::amp
