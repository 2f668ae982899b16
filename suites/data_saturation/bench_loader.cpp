// Benchmarks of the data pipeline:
//  - data/loader: one epoch of batches through tc::ref::Loader (seeded augmentation + a costly
//    blur, kBlurRounds) by worker count x prefetch depth; counters samples/s and bytes/s (rates).
//    The consumer takes batches as fast as they come: this is the loader's throughput, not the
//    data-wait fraction (that is the data_saturation check).
//  - data/h2d_copy: a 16 MiB batch to the CUDA device, pageable vs pinned vs pinned+non_blocking,
//    timed until the copy is complete. Without a CUDA device they are registered and skipped with
//    a message ("skipped: ..."), which `torchconform bench` reports as a skip, not a failure.
#include <chrono>
#include <string>

#include <torch/cuda.h>
#include <torch/torch.h>

#include "harness/contract/bench_registry.h"
#include "reference/data.h"
#include "reference/loader_tools.h"

namespace {

constexpr int64_t kBatch = 16;
constexpr int64_t kBatches = 12;     // one epoch per iteration
constexpr int64_t kBlurRounds = 40;  // a few ms per batch: the workers have real work to split

void loader_throughput(benchmark::State& state, int64_t workers, int64_t prefetch) {
  tc::ref::DataOptions d;
  d.size = kBatch * kBatches;
  tc::ref::SyntheticImages data(d);
  auto make = [&](int64_t i) {
    tc::ref::Batch b;
    b.index = i;
    at::Tensor x = data.images().narrow(0, i * kBatch, kBatch);  // (B, 3, S, S)
    b.images = tc::ref::costly_blur(tc::ref::augment(x, tc::ref::batch_seed(7, i)), kBlurRounds);
    b.labels = data.labels().narrow(0, i * kBatch, kBatch);  // (B)
    return b;
  };
  int64_t bytes_per_batch = 0;
  // Rates over wall time, measured here: Google Benchmark's kIsRate divides by the main thread's
  // CPU time unless UseRealTime(), and UseRealTime() renames the run ("/real_time"), which would
  // detach it from its registered (name, device). The record's own time is real time already.
  double wall_s = 0.0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    tc::ref::Loader loader(0, kBatches, {workers, prefetch}, make);
    while (auto b = loader.next()) bytes_per_batch = b->images.nbytes() + b->labels.nbytes();
    wall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const double samples = static_cast<double>(state.iterations() * kBatches * kBatch);
  state.counters["samples_per_s"] = wall_s > 0 ? samples / wall_s : 0.0;
  state.counters["bytes_per_s"] =
      wall_s > 0 ? static_cast<double>(state.iterations() * kBatches * bytes_per_batch) / wall_s : 0.0;
  state.counters["workers"] = static_cast<double>(workers);
  state.counters["prefetch"] = static_cast<double>(prefetch);
}

enum class CopyKind { kPageable, kPinned, kPinnedNonBlocking };

void h2d_copy(benchmark::State& state, CopyKind kind) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("skipped: no CUDA device");
    for (auto _ : state) {
    }
    return;
  }
  at::Tensor host = torch::rand({int64_t{16} << 20 >> 2});  // 16 MiB float32
  if (kind != CopyKind::kPageable) host = host.pin_memory();
  const bool non_blocking = kind == CopyKind::kPinnedNonBlocking;
  const c10::Device cuda(c10::kCUDA);
  host.to(cuda);  // warm-up: context, allocator
  torch::cuda::synchronize();
  double wall_s = 0.0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    at::Tensor dev = host.to(cuda, non_blocking);
    torch::cuda::synchronize();
    wall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    benchmark::DoNotOptimize(dev.data_ptr());
  }
  state.counters["bytes_per_s"] =
      wall_s > 0 ? static_cast<double>(state.iterations() * host.nbytes()) / wall_s : 0.0;
}

// One registration per (workers, prefetch), so each is its own record in the report.
TC_BENCHMARKS() {
  for (int64_t w : {0, 1, 2, 4}) {
    for (int64_t p : {1, 2, 4}) {
      if (w == 0 && p > 1) continue;  // no queue without workers
      tc::bench::add("data/loader/workers:" + std::to_string(w) + "/prefetch:" + std::to_string(p), "cpu",
                     [w, p](benchmark::State& s) { loader_throughput(s, w, p); })
          ->Unit(benchmark::kMillisecond);
    }
  }
  tc::bench::add("data/h2d_copy/pageable", "cuda", [](benchmark::State& s) { h2d_copy(s, CopyKind::kPageable); })
      ->Unit(benchmark::kMicrosecond);
  tc::bench::add("data/h2d_copy/pinned", "cuda", [](benchmark::State& s) { h2d_copy(s, CopyKind::kPinned); })
      ->Unit(benchmark::kMicrosecond);
  tc::bench::add("data/h2d_copy/pinned_non_blocking", "cuda",
                 [](benchmark::State& s) { h2d_copy(s, CopyKind::kPinnedNonBlocking); })
      ->Unit(benchmark::kMicrosecond);
}

}  // namespace
