#include "suites/amp/throughput.h"

#include "harness/util/text_format.h"
#include "suites/amp/dtype.h"
#include "suites/amp/speed_judge.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "harness/contract/cuda_support.h"

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

// What the figures were measured on, for the record (never a bar).
std::string hardware_of(bool cuda) {
  if (cuda) {
    const cuda_support::Api* api = cuda_support::api();
    cuda_support::DeviceInfo d;
    if (api == nullptr || !api->device_info(api->current_device(), &d)) return "CUDA device";
    return d.name + ", compute capability " + std::to_string(d.major) + "." + std::to_string(d.minor);
  }
  std::string h = "CPU flags:";
  for (const auto& f : cpu_precision_flags()) h += " " + f;
  return h;
}

nlohmann::json figures(const stats::MedianInterval& m) {
  return {{"median", m.median}, {"ci95_low", m.has_interval ? nlohmann::json(m.lo) : nlohmann::json()},
          {"ci95_high", m.has_interval ? nlohmann::json(m.hi) : nlohmann::json()}, {"coverage", m.coverage},
          {"rounds", m.n}};
}

double median_of(const std::vector<double>& v) { return stats::median_interval(v).median; }

}  // namespace

std::function<double()> matmuls_of(const WorkloadSize& s, const c10::Device& device, c10::ScalarType dtype,
                                   uint64_t seed) {
  torch::manual_seed(seed);
  const auto opts = torch::TensorOptions().dtype(dtype).device(device);
  auto make = [&](std::vector<int64_t> shape) { return torch::randn(shape).to(opts); };
  struct Linear {
    at::Tensor x, w, dy;  // (M, in), (out, in), (M, out)
    bool input_grad;
  };
  const int64_t m = s.batch * s.seq, d = s.dim, f = s.ff, bh = s.batch * s.heads, dh = s.dim / s.heads;
  std::vector<Linear> linears;
  auto linear = [&](int64_t rows, int64_t in, int64_t out, bool input_grad) {
    linears.push_back({make({rows, in}), make({out, in}), make({rows, out}), input_grad});
  };
  linear(m, d, d, false);     // embed (its input needs no gradient)
  linear(m, d, 3 * d, true);  // qkv
  linear(m, d, d, true);      // proj
  linear(m, d, f, true);      // ff1
  linear(m, f, d, true);      // ff2
  linear(s.batch, d, s.classes, true);  // head
  const at::Tensor q = make({bh, s.seq, dh}), k = make({bh, s.seq, dh}), v = make({bh, s.seq, dh});
  const at::Tensor p = make({bh, s.seq, s.seq}), dout = make({bh, s.seq, dh});
  const bool cuda = device.is_cuda();
  return [linears, q, k, v, p, dout, cuda] {
    for (const Linear& l : linears) {
      (void)at::mm(l.x, l.w.t());                   // y = x W^T
      if (l.input_grad) (void)at::mm(l.dy, l.w);    // dx = dy W
      (void)at::mm(l.dy.t(), l.x);                  // dW = dy^T x
    }
    (void)at::bmm(q, k.transpose(1, 2));     // scores
    (void)at::bmm(p, v);                     // out
    (void)at::bmm(dout, v.transpose(1, 2));  // d probabilities
    (void)at::bmm(p.transpose(1, 2), dout);  // dv
    (void)at::bmm(p, k);                     // dq (dscores k)
    (void)at::bmm(p.transpose(1, 2), q);     // dk (dscores^T q)
    if (cuda) torch::cuda::synchronize();
    return 0.0;
  };
}

namespace {

// The reference whose step splits the batch into the given micro-batches (its accumulation slot).
class SplitReference : public ref::ReferenceRun {
 public:
  explicit SplitReference(std::vector<int64_t> split) : split_(std::move(split)) {}

 protected:
  std::vector<int64_t> micro_batch_sizes(int64_t batch) const override {
    int64_t rows = 0;
    for (int64_t n : split_) rows += n;
    return rows == batch ? split_ : std::vector<int64_t>{batch};
  }

 private:
  std::vector<int64_t> split_;
};

// The block's matmuls once per micro-batch of the split, each of its rows, and in a narrower dtype
// the casts of the block's fp32 weights that autocast must make in each autocast region (one per
// micro-batch: its cache lives as long as the region): what a mixed-precision step attains at best.
std::function<double()> split_matmuls(const std::vector<int64_t>& split, const WorkloadSize& s, const c10::Device& device,
                                      c10::ScalarType dtype, uint64_t seed) {
  std::vector<std::function<double()>> parts;
  for (int64_t n : split) {
    WorkloadSize part = s;
    part.batch = n;
    parts.push_back(matmuls_of(part, device, dtype, seed));
  }
  std::vector<at::Tensor> weights;  // fp32, as the workload's model holds them
  if (dtype != c10::kFloat) {
    const auto f32 = torch::TensorOptions().dtype(c10::kFloat).device(device);
    for (const auto& [out, in] : std::vector<std::pair<int64_t, int64_t>>{
             {s.dim, s.dim}, {3 * s.dim, s.dim}, {s.dim, s.dim}, {s.ff, s.dim}, {s.dim, s.ff}, {s.classes, s.dim}}) {
      weights.push_back(torch::randn({out, in}, f32));
    }
  }
  const bool cuda = device.is_cuda();
  return [parts, weights, dtype, cuda] {
    for (const auto& p : parts) {
      for (const at::Tensor& w : weights) (void)w.to(dtype);
      p();
    }
    if (cuda) torch::cuda::synchronize();
    return 0.0;
  };
}

// The recipe's split of the workload's batch (gradient accumulation), given to the reference and
// to the matmuls: what is compared is the mixed-precision procedure, on the same micro-batches.
std::vector<int64_t> recipe_split(AmpProbe& recipe, int64_t batch) {
  std::vector<int64_t> split = recipe.amp_micro_batches(batch);
  int64_t rows = 0;
  for (int64_t n : split) rows += n > 0 ? n : batch + 1;
  if (split.empty() || rows != batch) split = {batch};
  return split;
}

// What the six timed steps gave: their rounds, the verdict, and the words every finding quotes.
struct Measured {
  SpeedRounds r;
  SpeedVerdict v;
  double wall = 0.0;
  std::string workload, rounds, hardware;
};

// Rounds of the six steps (the references' fp32 and AMP, the recipe's, the matmuls' in fp32 and the
// dtype), interleaved and alternating in order, until the verdict is decided or the budget is spent.
Measured time_steps(const CheckContext& ctx, const std::function<double()>& mine, const std::function<double()>& mine32,
                    const std::vector<int64_t>& split, const WorkloadSize& size, c10::ScalarType dtype, uint64_t seed) {
  const bool cuda = ctx.device == "cuda";
  const c10::Device device = cuda ? c10::Device(c10::kCUDA) : c10::Device(c10::kCPU);
  SplitReference ref_amp(split), ref_fp32(split);
  AmpOptions o;
  o.dtype = dtype;
  ref_amp.set_amp(o);
  ref_amp.setup(run_options(ctx, ctx.seed));
  ref_fp32.setup(run_options(ctx, ctx.seed));
  const std::function<double()> theirs = ref_amp.amp_step_on(make_workload(size, device, seed));
  const std::function<double()> fp32 = ref_fp32.amp_step_on(make_workload(size, device, seed));
  const std::function<double()> gemm32 = split_matmuls(split, size, device, c10::kFloat, seed + 1);
  const std::function<double()> gemmd = split_matmuls(split, size, device, dtype, seed + 1);

  const double budget_s = cuda ? 30.0 : 60.0;
  constexpr int kMinRounds = 6, kMaxRounds = 4000;
  Measured m;
  SpeedRounds& r = m.r;
  const std::vector<std::pair<const std::function<double()>*, std::vector<double>*>> timed = {
      {&fp32, &r.ref_fp32},      {&theirs, &r.ref_amp}, {&mine32, &r.recipe_fp32},
      {&mine, &r.recipe_amp},    {&gemm32, &r.gemm_fp32}, {&gemmd, &r.gemm_amp}};
  TimingScope timing(cuda);
  const auto start = std::chrono::steady_clock::now();
  for (const auto& [step, _] : timed) (*step)();  // warm-up: allocations, kernel selection, the autocast paths
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  while (true) {
    const int n = static_cast<int>(r.size()) + 1;
    for (size_t j = 0; j < timed.size(); ++j) {
      const auto& [step, into] = timed[n % 2 == 1 ? j : timed.size() - 1 - j];
      into->push_back(seconds(*step, cuda));
    }
    if (n < kMinRounds || n % 2 == 1) continue;
    m.v = judge_speed(r);
    if (m.v.decided() || n >= kMaxRounds || elapsed() > budget_s) break;
  }
  m.wall = elapsed();
  m.hardware = hardware_of(cuda);
  std::string split_text;
  if (split.size() > 1) {
    split_text = ", the batch split as the recipe accumulates (";
    for (size_t i = 0; i < split.size(); ++i) split_text += (i ? " + " : "") + std::to_string(split[i]);
    split_text += " sequences; the reference and the matmuls on the same split)";
  }
  m.workload = "transformer block " + std::to_string(size.batch) + "x" + std::to_string(size.seq) + " tokens, width " +
               std::to_string(size.dim) + ", MLP " + std::to_string(size.ff) + " (" + fmt::sig(step_flops(size) / 1e9, 4) +
               " GFLOP/step), " + (cuda ? "TF32 off" : "1 thread, its CPU time") + split_text + ": recipe's fp32 step " +
               fmt::sig(1e3 * median_of(r.recipe_fp32), 4) + " ms, its " + dtype_name(dtype) + " step " +
               fmt::sig(1e3 * median_of(r.recipe_amp), 4) + " ms";
  m.rounds = std::to_string(r.size()) + " rounds in " + fmt::sig(m.wall, 3) + " s";
  return m;
}

}  // namespace

int64_t fitted_seq(int64_t seq, double dtype_matmuls_s) {
  int64_t out = seq;
  for (double predicted = dtype_matmuls_s; predicted > kDtypeStepTarget && out / 2 >= kMinFittedSeq; predicted /= 2) {
    out /= 2;
  }
  return out;
}

namespace {

// The CPU workload fitted to this machine's `dtype` matmuls. It was sized for a single-threaded
// fp32 step of 50-65 ms, where the dtype runs as fast or faster (AVX-512 BF16, AMX). A CPU without
// native arithmetic in the dtype runs it far slower (an AVX2-only EPYC: the block's bf16 matmuls
// 0.43-0.45 s against 0.016 s in fp32, 26x), and three of each round's six timed steps are in the
// dtype: the protocol's 7 rounds took 9.7 s of a 10.2 s cell. There the tokens per sequence are
// halved until the dtype's matmuls (timed once on a quarter of the tokens, the thread's CPU time,
// 1 thread) would take at most kDtypeStepTarget, down to 8. The same block, batch and split: what
// is judged (the recipe's AMP step against the reference's, the machine's gain against its
// ceiling) is measured on one size for all six, and where the dtype is that slow its matmuls are
// still nearly the whole step (recorded each time: the steps' and the matmuls' medians).
struct Fitted {
  WorkloadSize size;
  std::string why;  // empty: not cut
};
Fitted fitted_workload(const WorkloadSize& size, const c10::Device& device, c10::ScalarType dtype, uint64_t seed) {
  Fitted f{size, ""};
  if (device.is_cuda() || dtype == c10::kFloat) return f;
  // Timed on a quarter of the tokens (the linears' work is per token, and a quarter costs a
  // quarter: where the dtype is fast this probe is a few ms), scaled to the whole.
  WorkloadSize quarter = size;
  quarter.seq = std::max<int64_t>(kMinFittedSeq, size.seq / 4);
  double t = 0;
  {
    TimingScope timing(false);
    t = seconds(matmuls_of(quarter, device, dtype, seed + 2), false) * static_cast<double>(size.seq) /
        static_cast<double>(quarter.seq);
  }
  const int64_t seq = fitted_seq(size.seq, t);
  if (seq == size.seq) return f;
  f.size.seq = seq;
  f.why = "tokens per sequence cut from " + std::to_string(size.seq) + " to " + std::to_string(seq) + ": this CPU's " +
          dtype_name(dtype) + " matmuls would take " + fmt::sig(t, 3) + " s a step at " + std::to_string(size.batch) + "x" +
          std::to_string(size.seq) + " tokens (timed at " + std::to_string(quarter.batch) + "x" +
          std::to_string(quarter.seq) + "), over the " + fmt::sig(kDtypeStepTarget, 2) + " s a timed step is sized for";
  return f;
}

nlohmann::json throughput_metrics(const Measured& m, const Fitted& fitted, const std::vector<int64_t>& split) {
  const SpeedVerdict& v = m.v;
  const WorkloadSize& size = fitted.size;
  return {{"workload", {{"batch", size.batch}, {"seq", size.seq}, {"dim", size.dim}, {"heads", size.heads}, {"ff", size.ff},
                        {"flops_per_step", step_flops(size)},
                        {"fitted", fitted.why.empty() ? nlohmann::json() : nlohmann::json(fitted.why)}}},
          {"hardware", m.hardware},
          {"micro_batches", split},
          {"rounds", to_json(m.r)},
          {"ceiling_matmuls", figures(v.ceiling)},
          {"matmul_share_of_fp32_step", figures(v.matmul_share)},
          {"attainable_speedup", figures(v.attainable)},
          {"ceiling_says", to_string(v.ceiling_says)},
          {"speedup_over_fp32", figures(v.speedup)},
          {"reference_speedup_over_fp32", figures(v.reference_speedup)},
          {"procedure_ratio", figures(v.procedure)},
          {"procedure_bar", kProcedureBar},
          {"speedup_bar", figures(v.bar)},
          {"reference_saving_of_fp32_step", figures(v.reference_saving)},
          {"reference_says", to_string(v.reference_says)},
          {"gain_share", kGainShare},
          {"reference_share", kReferenceShare},
          {"min_attainable", kMinAttainable},
          {"speedup_judged", v.throughput_judged()},
          {"wall_s", m.wall}};
}

// The recipe's AMP procedure against the reference's: each one's speed-up over its own fp32 step.
void amp_procedure_speed(const Measured& m, const std::string& d, Findings& out) {
  const SpeedVerdict& v = m.v;
  const std::string proc = d + " AMP procedure speed on the " + m.workload + ": the recipe's speed-up over its own fp32 "
                           "step / the reference's over its own " + describe(v.procedure) + " (the recipe's " +
                           describe(v.speedup) + ", the reference's " + describe(v.reference_speedup) + "), bar " +
                           fmt::sig(kProcedureBar, 3);
  if (v.procedure_v == stats::BarVerdict::kPass) {
    out.held("amp_procedure_speed", proc);
  } else if (v.procedure_v == stats::BarVerdict::kFail) {
    out.broken("amp_procedure_speed", proc + ": the recipe's mixed precision gains less over fp32 than the reference's");
  } else {
    out.recorded("amp_procedure_speed", proc + ": undecided after " + m.rounds +
                                            " (the interval spans the bar): recorded, not judged");
  }
}

// The speed-up over fp32 against what this machine's matmuls attain in the dtype.
void throughput_against_ceiling(const Measured& m, const std::string& d, bool split, Findings& out) {
  const SpeedVerdict& v = m.v;
  const std::string ceiling = "this machine's " + d + " matmuls of the block run " + describe(v.ceiling) +
                              " faster than fp32 and take " + fmt::sig(100 * v.matmul_share.median, 3) +
                              "% of the recipe's fp32 step, so the step can attain " + describe(v.attainable) + "; " +
                              m.hardware;
  const std::string sp = d + " throughput / fp32 on the " + m.workload + ": " + describe(v.speedup) + "; " + ceiling;
  const std::string bar = "bar: save " + fmt::sig(100 * kGainShare, 3) + "% of the time the matmuls would save or " +
                          fmt::sig(100 * kReferenceShare, 3) + "% of the time the reference's procedure saves (" +
                          fmt::sig(100 * v.reference_saving.median, 3) + "% of the recipe's fp32 step), whichever is less: "
                          "a speed-up of " + fmt::sig(v.bar.median, 3) + "; speed-up / bar " + describe(v.against_bar);
  if (v.ceiling_says == Ceiling::kNoGain) {
    out.recorded("throughput", sp + ": recorded, not judged (the attainable speed-up is under " +
                                   fmt::sig(kMinAttainable, 3) + ": this machine gives " + d + " no gain to take)");
  } else if (v.reference_says == Ceiling::kNoGain) {
    // Correct mixed precision, on the same workload and split, is no faster than fp32 here: a recipe
    // is not asked for a gain that correct code does not take (amp_procedure_speed compares the two).
    out.recorded("throughput", sp + ": recorded, not judged: the reference's own procedure attains " +
                                   describe(v.reference_speedup) + (split ? " on the recipe's micro-batches" : "") +
                                   ", no gain over fp32, so correct " + d + " takes none on this machine");
  } else if (v.ceiling_says == Ceiling::kUndecided || v.reference_says == Ceiling::kUndecided) {
    const bool machine = v.ceiling_says == Ceiling::kUndecided;
    out.recorded("throughput", sp + ": recorded, not judged: whether " +
                                   (machine ? "the machine gives " + d + " a gain" : "the reference's procedure gains") +
                                   " stayed undecided after " + m.rounds + " (" +
                                   (machine ? "the attainable speed-up's interval spans " + fmt::sig(kMinAttainable, 3)
                                            : "its speed-up " + describe(v.reference_speedup) + " spans 1") + ")");
  } else if (v.throughput_v == stats::BarVerdict::kPass) {
    out.held("throughput", sp + "; " + bar);
  } else if (v.throughput_v == stats::BarVerdict::kFail) {
    out.broken("throughput", sp + "; " + bar + ": mixed precision saves less than that in " + d +
                                 " (the reference's procedure: " + describe(v.reference_speedup) + ")");
  } else {
    out.recorded("throughput", sp + "; " + bar + ": undecided after " + m.rounds +
                                   " (the interval spans the bar): recorded, not judged");
  }
}

}  // namespace

void throughput(const CheckContext& ctx, AmpProbe& recipe, AmpProbe& recipe_fp32, c10::ScalarType dtype,
                Findings& out) {
  const c10::Device device = ctx.device == "cuda" ? c10::Device(c10::kCUDA) : c10::Device(c10::kCPU);
  const std::string d = dtype_name(dtype);
  const uint64_t seed = static_cast<uint64_t>(ctx.seed) + 101;
  const Fitted fitted = fitted_workload(workload_size(device), device, dtype, seed);
  const WorkloadSize& size = fitted.size;
  std::function<double()> mine = recipe.amp_step_on(make_workload(size, device, seed));
  std::function<double()> mine32 = recipe_fp32.amp_step_on(make_workload(size, device, seed));
  if (!mine || !mine32) {
    const std::string why = "not measured (the recipe's AmpProbe::amp_step_on offers no way to apply its procedure "
                            "to the transformer workload: a recipe whose train_step is its own, not ReferenceRun's, "
                            "implements amp_step_on)";
    out.recorded("amp_procedure_speed", d + " AMP procedure speed: " + why);
    out.recorded("throughput", d + " throughput: " + why);
    return;
  }
  const std::vector<int64_t> split = recipe_split(recipe, size.batch);
  Measured m = time_steps(ctx, mine, mine32, split, size, dtype, seed);
  if (!fitted.why.empty()) m.workload += " (" + fitted.why + ")";
  out.metrics()["throughput_" + d] = throughput_metrics(m, fitted, split);
  amp_procedure_speed(m, d, out);
  throughput_against_ceiling(m, d, split.size() > 1, out);
}

}  // namespace tc::amp
