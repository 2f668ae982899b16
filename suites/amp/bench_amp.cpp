// Benchmarks of mixed precision (Google Benchmark):
//   amp/train_step/{cnn,transformer}/{fp32,bf16}  on cpu (bf16 autocast, no scaler: bf16 has fp32's range)
//   amp/train_step/{cnn,transformer}/{fp32,fp16,bf16}  on cuda (fp16 with the GradScaler)
//   amp/matmul_ceiling/{fp32,bf16[,fp16]}/N  a dense N x N x N GEMM; counter TFLOP/s: the device's
//     ceiling, against which a train step's throughput can be read.
// The transformer entries train the amp check's throughput workload (suites/amp/throughput.h: sized
// per device) and report its model FLOPs per step (matmul FLOPs of forward and backward),
// achieved TFLOP/s, and MFU = achieved / the matmul ceiling of the step's dtype measured on the
// same device in the same process (matmul_ceiling_tflops below: measured once per device and
// dtype, same thread count and TF32 setting as the step).
// One train step = reference/amp_step.h (autocast forward, scaled backward, unscale_, clip 1.0,
// SGD step, update) on a fixed batch, so only the step is timed. CPU runs single-threaded unless
// TORCHCONFORM_BENCH_THREADS=N (see bench_train_step.cpp: a busy shared core makes multi-threaded
// kernels wait on each other). Without a CUDA device the cuda entries are skipped with that reason.
// On CUDA each iteration's time is the GPU's (UseManualTime): two CUDA events recorded on the
// device's current stream around the step, their elapsed time once the second has completed. It
// is the span of the GPU's timeline from the step's first enqueued work to its last (kernels, and
// any gap in which the GPU waited for the host to launch more), without the host's own time before
// the first launch and after the last: what `compare`, `trend` and `ab` gate CUDA benchmarks on
// (Google Benchmark reports manual time as real_time), where a shared host's noise barely reaches.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>

#include <ATen/Context.h>
#include <ATen/DeviceAccelerator.h>
#include <ATen/Parallel.h>
#include <c10/core/Event.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "harness/contract/bench_registry.h"
#include "reference/amp_step.h"
#include "reference/model.h"
#include "reference/transformer.h"
#include "suites/amp/dtype.h"
#include "suites/amp/throughput.h"

namespace {

using tc::ref::AmpStepOptions;

int bench_threads() {
  const char* v = std::getenv("TORCHCONFORM_BENCH_THREADS");
  return v && *v ? std::max(1, std::atoi(v)) : 1;
}

// Sets the CPU thread count for one benchmark and restores it after.
struct ThreadScope {
  int before = at::get_num_threads();
  ThreadScope() { at::set_num_threads(bench_threads()); }
  ~ThreadScope() { at::set_num_threads(before); }
};

bool skip_without_cuda(benchmark::State& state, const c10::Device& device) {
  if (device.is_cuda() && !torch::cuda::is_available()) {
    state.SkipWithError("skipped: no CUDA device");
    return true;
  }
  return false;
}

void sync(const c10::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

// The GPU's time of one span of work on the device's current stream (see the header): CUDA events
// with timing enabled (c10::EventFlag::BACKEND_DEFAULT), the host waiting on the second.
class GpuSpan {
 public:
  explicit GpuSpan(const c10::Device& device)
      : stream_(at::accelerator::getCurrentStream(device.has_index() ? device.index() : at::accelerator::getDeviceIndex())),
        start_(c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT),
        stop_(c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT) {}
  void begin() { start_.record(stream_); }
  // Seconds between begin() and now on the GPU's timeline; waits for the work to finish.
  double end() {
    stop_.record(stream_);
    stop_.synchronize();
    return start_.elapsedTime(stop_) / 1e3;  // elapsedTime: milliseconds
  }

 private:
  c10::Stream stream_;
  c10::Event start_, stop_;
};

// fp32 on CUDA means fp32: TF32 off while a benchmark runs, restored after.
struct NoTf32 {
  bool cublas = at::globalContext().allowTF32CuBLAS();
  bool cudnn = at::globalContext().allowTF32CuDNN();
  NoTf32() {
    at::globalContext().setAllowTF32CuBLAS(false);
    at::globalContext().setAllowTF32CuDNN(false);
  }
  ~NoTf32() {
    at::globalContext().setAllowTF32CuBLAS(cublas);
    at::globalContext().setAllowTF32CuDNN(cudnn);
  }
};

// The matmul ceiling in TFLOP/s for (device, dtype), measured once per process: the best rate of 3
// timed GEMMs, through at::mm and through at::linear, for each of a dense N x N x N (N = 1024 on
// the CPU, 8192 on CUDA) and the workload's own MLP shapes (tokens x dim x ff, tokens x ff x dim).
// On a CPU without AVX-512, bf16 at::mm runs at about 0.4 GFLOP/s and at::linear (oneDNN) at about
// 3.5: a ceiling from at::mm alone sat below the step's own rate (MFU 2.8).
double matmul_ceiling_tflops(const c10::Device& device, c10::ScalarType dtype) {
  static std::map<std::pair<int, int>, double> cache;
  const auto key = std::make_pair(static_cast<int>(device.type()), static_cast<int>(dtype));
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const int64_t n = device.is_cuda() ? 8192 : 1024;
  const tc::amp::WorkloadSize w = tc::amp::workload_size(device);
  const int64_t tokens = w.batch * w.seq;
  const int64_t shapes[3][3] = {{n, n, n}, {tokens, w.dim, w.ff}, {tokens, w.ff, w.dim}};  // (m, k, n)
  auto opts = torch::dtype(dtype).device(device);
  double best = 0.0;
  for (const auto& sh : shapes) {
    at::Tensor a = torch::randn({sh[0], sh[1]}, opts), b = torch::randn({sh[1], sh[2]}, opts);
    at::Tensor bt = b.t().contiguous(), c = torch::mm(a, b);
    // Both entry points: on the CPU bf16 at::linear takes oneDNN's path, at::mm a slower one.
    const std::function<void()> ops[] = {[&] { at::mm_out(c, a, b); }, [&] { c = at::linear(a, bt); }};
    for (const auto& op : ops) {
      op();  // warm-up
      sync(device);
      for (int i = 0; i < 3; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        op();
        sync(device);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best = std::max(best, 2.0 * sh[0] * sh[1] * sh[2] / s / 1e12);
      }
    }
  }
  return cache[key] = best;
}

enum class Model { kCnn, kTransformer };

void train_step(benchmark::State& state, Model kind, c10::Device device, c10::ScalarType dtype) {
  if (skip_without_cuda(state, device)) return;
  ThreadScope threads;
  NoTf32 no_tf32;
  torch::manual_seed(0);
  std::shared_ptr<torch::nn::Module> module;
  std::function<at::Tensor(const at::Tensor&)> forward;
  at::Tensor x;
  const tc::amp::WorkloadSize size = tc::amp::workload_size(device);
  const int64_t batch = kind == Model::kCnn ? 16 : size.batch;
  if (kind == Model::kCnn) {
    tc::ref::ImageClassifier m(4, 16, 0.5);
    tc::ref::init_weights(*m);
    module = m.ptr();
    forward = [m](const at::Tensor& in) mutable { return m->forward(in); };
    x = torch::randn({batch, 3, 16, 16});  // (B, 3, S, S)
  } else {
    tc::ref::TransformerBlock m(tc::amp::transformer_options(size));
    module = m.ptr();
    forward = [m](const at::Tensor& in) mutable { return m->forward(in); };
    x = torch::randn({batch, m->options.seq, m->options.dim});  // (B, T, D)
  }
  module->to(device);
  module->train();
  x = x.to(device);
  at::Tensor y = torch::randint(0, 4, {batch}, torch::kLong).to(device);
  auto params = module->parameters();
  torch::optim::SGD opt(params, torch::optim::SGDOptions(0.01).momentum(0.9));
  tc::ref::GradScaler scaler(tc::GradScalerOptions{}.with_enabled(dtype == c10::kHalf));
  AmpStepOptions o;
  o.device = device;
  o.dtype = dtype;
  auto fl = [&] { return torch::nn::functional::cross_entropy(forward(x), y); };
  for (int i = 0; i < 3; ++i) tc::ref::amp_train_step(fl, opt, scaler, params, o);  // warm-up
  sync(device);
  const auto t0 = std::chrono::steady_clock::now();
  if (device.is_cuda()) {
    GpuSpan span(device);
    for (auto _ : state) {
      span.begin();
      at::Tensor loss = tc::ref::amp_train_step(fl, opt, scaler, params, o);
      state.SetIterationTime(span.end());
      benchmark::DoNotOptimize(loss);
    }
  } else {
    for (auto _ : state) {
      at::Tensor loss = tc::ref::amp_train_step(fl, opt, scaler, params, o);
      benchmark::DoNotOptimize(loss);
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (kind == Model::kTransformer && state.iterations() > 0) {
    const double flops = tc::amp::step_flops(size);
    const double achieved = flops * static_cast<double>(state.iterations()) / wall / 1e12;
    const double ceiling = matmul_ceiling_tflops(device, dtype);
    state.counters["model_GFLOP_per_step"] = flops / 1e9;
    state.counters["TFLOP/s"] = achieved;
    state.counters["ceiling_TFLOP/s"] = ceiling;
    state.counters["MFU"] = ceiling > 0 ? achieved / ceiling : 0.0;
  }
  state.counters["samples_per_s"] = benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = device.is_cpu() ? at::get_num_threads() : 0;
}

void matmul_ceiling(benchmark::State& state, c10::Device device, c10::ScalarType dtype) {
  if (skip_without_cuda(state, device)) return;
  ThreadScope threads;
  NoTf32 no_tf32;
  const int64_t n = state.range(0);
  auto opts = torch::dtype(dtype).device(device);
  at::Tensor a = torch::randn({n, n}, opts), b = torch::randn({n, n}, opts);
  at::Tensor c = torch::mm(a, b);  // warm-up
  sync(device);
  if (device.is_cuda()) {
    GpuSpan span(device);
    for (auto _ : state) {
      span.begin();
      at::mm_out(c, a, b);
      state.SetIterationTime(span.end());
    }
  } else {
    for (auto _ : state) at::mm_out(c, a, b);
  }
  state.counters["TFLOP/s"] = benchmark::Counter(2.0 * n * n * n / 1e12, benchmark::Counter::kIsIterationInvariantRate);
}

TC_BENCHMARKS() {
  const c10::Device cpu(c10::kCPU), cuda(c10::kCUDA);
  for (Model m : {Model::kCnn, Model::kTransformer}) {
    const std::string model = m == Model::kCnn ? "cnn" : "transformer";
    for (auto t : {c10::kFloat, c10::kBFloat16}) {
      tc::bench::add("amp/train_step/" + model + "/" + tc::amp::dtype_name(t), "cpu",
                     [=](benchmark::State& s) { train_step(s, m, cpu, t); })
          ->Unit(benchmark::kMillisecond);
    }
    for (auto t : {c10::kFloat, c10::kHalf, c10::kBFloat16}) {
      tc::bench::add("amp/train_step/" + model + "/" + tc::amp::dtype_name(t), "cuda",
                     [=](benchmark::State& s) { train_step(s, m, cuda, t); })
          ->Unit(benchmark::kMillisecond)
          ->UseManualTime();  // CUDA events (GpuSpan)
    }
  }
  for (auto t : {c10::kFloat, c10::kBFloat16}) {
    tc::bench::add("amp/matmul_ceiling/" + tc::amp::dtype_name(t), "cpu",
                   [=](benchmark::State& s) { matmul_ceiling(s, cpu, t); })
        ->Arg(256)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);
  }
  for (auto t : {c10::kFloat, c10::kHalf, c10::kBFloat16}) {
    tc::bench::add("amp/matmul_ceiling/" + tc::amp::dtype_name(t), "cuda",
                   [=](benchmark::State& s) { matmul_ceiling(s, cuda, t); })
        ->Arg(4096)->Arg(8192)->Unit(benchmark::kMillisecond)->UseManualTime();  // CUDA events
  }
}

}  // namespace
