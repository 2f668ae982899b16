// tc_allreduce_bench: c10d all-reduce bandwidth under torchrun, as nccl-tests reports it.
//
//   torchrun --standalone --nproc-per-node=2 --no-python tc_allreduce_bench [--backend gloo|nccl]
//       [--min-bytes N] [--max-bytes N] [--reps R] [google-benchmark flags]
//
// One Google Benchmark per message size (float32 sum), fixed iterations and repetitions so that
// every rank runs the same collectives in lockstep (Google Benchmark's adaptive iteration count
// would differ between ranks and deadlock them). Each iteration starts after a barrier; its time is
// the all-reduce alone (manual time, completed: CUDA synchronised). Counters, per nccl-tests:
// algbw = bytes / time, busbw = algbw * 2(n-1)/n, and `wrong` = elements that differ from the
// expected sum in a check run before the timed iterations. Rank 0 reports; exit 1 if any element
// was wrong (on any rank).
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "reference/distributed.h"

namespace {

namespace dist = tc::ref::dist;

class NullReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

int64_t g_wrong_total = 0;

void bench_allreduce(benchmark::State& state, dist::ProcessGroup& pg, c10::Device device, int64_t bytes) {
  const int64_t numel = bytes / 4;
  const int n = pg.size();
  // Correctness: rank r holds (r + 1) + (i % 7); the sum is n(n+1)/2 + n (i % 7).
  at::Tensor pattern = torch::arange(numel, torch::kLong).remainder(7).to(torch::kFloat);
  std::vector<at::Tensor> check{(pattern + static_cast<float>(pg.rank() + 1)).to(device)};
  pg.allreduce_sum(check);
  const at::Tensor want = pattern * static_cast<float>(n) + static_cast<float>(n * (n + 1) / 2);
  const int64_t wrong = check[0].cpu().ne(want).sum().item<int64_t>();
  g_wrong_total += wrong;

  std::vector<at::Tensor> t{torch::zeros({numel}, torch::TensorOptions().dtype(torch::kFloat).device(device))};
  double seconds = 0.0;
  for (auto _ : state) {
    pg.barrier();  // every rank starts the iteration together; not timed
    const auto t0 = std::chrono::steady_clock::now();
    pg.allreduce_sum(t);  // waited for; on CUDA the wait is on the stream: synchronise
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(s);
    seconds += s;
  }
  const double iters = static_cast<double>(state.iterations());
  const double algbw = static_cast<double>(bytes) * iters / seconds / 1e9;  // GB/s
  state.counters["bytes"] = static_cast<double>(bytes);
  state.counters["algbw_GBps"] = algbw;
  state.counters["busbw_GBps"] = algbw * 2.0 * (n - 1) / n;
  state.counters["wrong"] = static_cast<double>(wrong);
  state.counters["ranks"] = n;
  state.SetBytesProcessed(static_cast<int64_t>(bytes * iters));
}

int64_t parse_bytes(const std::string& s) {
  size_t used = 0;
  int64_t v = std::stoll(s, &used);
  const std::string unit = s.substr(used);
  if (unit == "K" || unit == "KiB") v <<= 10;
  else if (unit == "M" || unit == "MiB") v <<= 20;
  else if (unit == "G" || unit == "GiB") v <<= 30;
  else if (!unit.empty()) throw std::invalid_argument("size '" + s + "': unit K, M or G");
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "gloo";
  int64_t min_bytes = 4 << 10, max_bytes = 64 << 20;
  int reps = 5;
  std::optional<dist::LaunchEnv> env;
  try {
    env = dist::LaunchEnv::from_environment();
    if (!env) throw std::invalid_argument("RANK/WORLD_SIZE not set: launch with torchrun --no-python");
  } catch (const std::exception& e) {
    std::cerr << "tc_allreduce_bench: " << e.what() << '\n';
    return 2;
  }
  std::vector<char*> gargs{argv[0]};
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
        return argv[++i];
      };
      if (a == "--backend") backend = value();
      else if (a == "--min-bytes") min_bytes = parse_bytes(value());
      else if (a == "--max-bytes") max_bytes = parse_bytes(value());
      else if (a == "--reps") reps = std::stoi(value());
      else if (env->rank != 0 && a.rfind("--benchmark_out", 0) == 0) continue;  // rank 0 writes
      else gargs.push_back(argv[i]);
    }
    if (backend != "gloo" && backend != "nccl") throw std::invalid_argument("--backend gloo or nccl");
  } catch (const std::exception& e) {
    std::cerr << "tc_allreduce_bench: " << e.what() << '\n';
    return 2;
  }
  int gargc = static_cast<int>(gargs.size());
  benchmark::Initialize(&gargc, gargs.data());
  if (benchmark::ReportUnrecognizedArguments(gargc, gargs.data())) return 2;

  dist::GroupOptions go;
  go.backend = backend == "nccl" ? dist::Backend::kNccl : dist::Backend::kGloo;
  go.timeout = std::chrono::seconds(120);
  std::shared_ptr<dist::ProcessGroup> pg;
  try {
    pg = dist::ProcessGroup::create(*env, go);
  } catch (const std::exception& e) {
    std::cerr << "tc_allreduce_bench: " << e.what() << '\n';
    return 2;
  }
  const c10::Device device = go.backend == dist::Backend::kNccl
                                 ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(env->local_rank))
                                 : c10::Device(c10::kCPU);
  const std::string device_name = std::string(device.is_cuda() ? "cuda" : "cpu") + "x" + std::to_string(pg->size());
  for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    // About 64 MiB moved per repetition, 4 to 100 iterations: the same count on every rank.
    const int64_t iters = std::clamp<int64_t>((int64_t{64} << 20) / bytes, 4, 100);
    benchmark::RegisterBenchmark(
        ("allreduce/" + backend + "/" + device_name + "/bytes:" + std::to_string(bytes)).c_str(),
        [&pg, device, bytes](benchmark::State& s) { bench_allreduce(s, *pg, device, bytes); })
        ->Iterations(iters)
        ->Repetitions(reps)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
  if (pg->rank() == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    NullReporter quiet;
    benchmark::RunSpecifiedBenchmarks(&quiet);
  }
  benchmark::Shutdown();
  // Every rank's wrong count, summed: the exit code is the verdict.
  std::vector<at::Tensor> wrong{torch::tensor({g_wrong_total}, torch::kLong).to(device)};
  pg->allreduce_sum(wrong);
  const int64_t total_wrong = wrong[0].cpu().item<int64_t>();
  if (pg->rank() == 0) {
    std::cout << "wrong elements (all sizes, all ranks): " << total_wrong << (total_wrong ? "  FAIL" : "  OK") << '\n';
  }
  return total_wrong == 0 ? 0 : 1;
}
