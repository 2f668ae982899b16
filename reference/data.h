// Reference data pipeline: a fixed synthetic image dataset, a seeded sampler with a persistent
// position, a per-batch seeded augmentation, and a loader with worker threads.
//
// LibTorch's torch::data::DataLoader was not used: its RandomSampler shuffles with the global
// generator (not the loader's own), and with prefetching workers the sampler's saved index runs
// ahead of what training consumed, so it cannot resume mid-epoch exactly.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "harness/contract/loader_probe.h"  // LoaderOptions

namespace torch::serialize {
class OutputArchive;
class InputArchive;
}  // namespace torch::serialize

namespace tc::ref {

struct DataOptions {
  int64_t size = 96;
  int64_t classes = 4;
  int64_t image_size = 16;
  uint64_t data_seed = 20240601;  // the data itself is fixed, like files on disk
};

// N images (N, 3, S, S) float32 and labels (N) int64: per-class patterns plus per-sample noise.
class SyntheticImages {
 public:
  explicit SyntheticImages(const DataOptions& options);
  const at::Tensor& images() const { return images_; }
  const at::Tensor& labels() const { return labels_; }
  int64_t size() const { return labels_.size(0); }

 private:
  at::Tensor images_;
  at::Tensor labels_;
};

struct Batch {
  int64_t index = -1;  // position in the epoch
  at::Tensor images;   // (B, 3, S, S)
  at::Tensor labels;   // (B)
};

// The sampler slot (ReferenceRun::make_sampler): which samples make batch b of an epoch. An epoch
// has batches_per_epoch() batches; with drop_last off the last one may be short (the remainder).
// What it saves is what resuming mid-epoch needs (its order and anything the epoch drew).
class Sampler {
 public:
  virtual ~Sampler() = default;
  // Top of each epoch (DistributedSampler.set_epoch's role): this epoch's order.
  virtual void set_epoch(int64_t epoch) = 0;
  virtual bool has_epoch() const = 0;
  virtual int64_t epoch() const = 0;
  virtual int64_t batches_per_epoch() const = 0;
  virtual at::Tensor batch_indices(int64_t batch) const = 0;  // (b) int64, b <= batch size
  // The seed this epoch's augmentations derive from (0 when the sampler draws none).
  virtual uint64_t epoch_seed() const = 0;
  // Writes / reads the epoch's state (nothing before the first epoch).
  virtual void save(torch::serialize::OutputArchive& archive) const = 0;
  virtual void load(torch::serialize::InputArchive& archive) = 0;
};

// Shuffles with the loader's own generator. set_epoch draws the epoch's permutation and the seed
// its augmentations derive from; both, with the position, are what a checkpoint must keep.
class SeededSampler : public Sampler {
 public:
  SeededSampler() = default;
  SeededSampler(int64_t dataset_size, int64_t batch_size, at::Generator generator, bool drop_last = true);

  void set_epoch(int64_t epoch) override;
  bool has_epoch() const override { return permutation_.defined(); }
  int64_t epoch() const override { return epoch_; }
  int64_t batches_per_epoch() const override;
  at::Tensor batch_indices(int64_t batch) const override;  // (B) int64; the last may be shorter
  uint64_t epoch_seed() const override { return epoch_seed_; }
  const at::Tensor& permutation() const { return permutation_; }
  void restore(int64_t epoch, at::Tensor permutation, uint64_t epoch_seed);
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

 private:
  int64_t dataset_size_ = 0;
  int64_t batch_size_ = 1;
  bool drop_last_ = true;
  at::Generator generator_;
  int64_t epoch_ = -1;
  at::Tensor permutation_;
  uint64_t epoch_seed_ = 0;
};

// Random horizontal flip, shift (C++ std::mt19937_64) and brightness + Gaussian noise (torch
// generator), all drawn from `seed` alone: the same seed gives the same batch on any thread.
at::Tensor augment(const at::Tensor& images, uint64_t seed);

// Mixes the epoch's seed and a batch position into the batch's augmentation seed (splitmix64).
uint64_t batch_seed(uint64_t epoch_seed, int64_t batch);

// The worker count from the machine: one per hardware thread, minus one when the training thread
// itself computes on the host (CPU training), at least 1, at most 8. On an accelerator the host
// thread spends the step waiting on the device (no Python in LibTorch, launches are microseconds),
// so reserving a core for it would idle one of few cores; past 8 the per-batch work here is too
// small to need more and threads only add contention.
int64_t default_workers(bool host_trains);
// The same for a machine with `cores` cores (0: unknown, taken as 1).
int64_t default_workers(bool host_trains, int64_t cores);

// Makes batches first..count-1 with `make_batch` on worker threads (batch b on worker
// (b - first) % workers, like PyTorch's round robin) and hands them out in order.
class Loader {
 public:
  using MakeBatch = std::function<Batch(int64_t)>;
  Loader(int64_t first, int64_t count, LoaderOptions options, MakeBatch make_batch);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // nullopt at the end of the epoch. A batch whose making failed rethrows that error when its
  // turn comes (batches before it are still delivered), and again on every later call.
  std::optional<Batch> next();

 private:
  void work(int64_t worker);

  const int64_t first_;
  int64_t next_;
  const int64_t count_;
  const LoaderOptions options_;
  MakeBatch make_batch_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<int64_t, Batch> ready_;
  std::map<int64_t, std::exception_ptr> failed_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace tc::ref
