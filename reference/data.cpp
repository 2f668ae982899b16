#include "reference/data.h"

#include <algorithm>
#include <random>

#include <torch/serialize/archive.h>
#include <torch/torch.h>

#include "reference/seed.h"

namespace tc::ref {

SyntheticImages::SyntheticImages(const DataOptions& o) {
  at::Generator g = seeded_generator(o.data_seed);
  const auto s = o.image_size;
  at::Tensor prototypes = torch::randn({o.classes, 3, s, s}, g);       // (C, 3, S, S)
  labels_ = torch::arange(o.size, torch::kLong).remainder(o.classes);  // balanced classes
  at::Tensor noise = torch::randn({o.size, 3, s, s}, g);               // (N, 3, S, S)
  images_ = prototypes.index_select(0, labels_) + 1.5 * noise;         // (N, 3, S, S)
}

SeededSampler::SeededSampler(int64_t dataset_size, int64_t batch_size, at::Generator generator, bool drop_last)
    : dataset_size_(dataset_size), batch_size_(batch_size), drop_last_(drop_last), generator_(std::move(generator)) {
  TORCH_CHECK(batch_size > 0 && dataset_size >= batch_size, "SeededSampler: batch size ", batch_size,
              " for a dataset of ", dataset_size);
}

int64_t SeededSampler::batches_per_epoch() const {
  return drop_last_ ? dataset_size_ / batch_size_ : (dataset_size_ + batch_size_ - 1) / batch_size_;
}

void SeededSampler::set_epoch(int64_t epoch) {
  epoch_ = epoch;
  permutation_ = torch::randperm(dataset_size_, generator_, torch::kLong);
  epoch_seed_ = static_cast<uint64_t>(
      torch::randint(std::numeric_limits<int64_t>::max(), {1}, generator_, torch::kLong)
          .item<int64_t>());
}

at::Tensor SeededSampler::batch_indices(int64_t batch) const {
  TORCH_CHECK(has_epoch(), "SeededSampler: set_epoch() was never called");
  TORCH_CHECK(batch >= 0 && batch < batches_per_epoch(), "SeededSampler: batch ", batch, " of ",
              batches_per_epoch());
  const int64_t start = batch * batch_size_;
  return permutation_.narrow(0, start, std::min(batch_size_, dataset_size_ - start));
}

void SeededSampler::restore(int64_t epoch, at::Tensor permutation, uint64_t epoch_seed) {
  TORCH_CHECK(permutation.dim() == 1 && permutation.size(0) == dataset_size_,
              "SeededSampler: saved permutation has ", permutation.numel(),
              " entries, the dataset has ", dataset_size_);
  epoch_ = epoch;
  permutation_ = permutation.to(torch::kLong);
  epoch_seed_ = epoch_seed;
}

void SeededSampler::save(torch::serialize::OutputArchive& a) const {
  if (!has_epoch()) return;  // saved before the first epoch began
  a.write("epoch", c10::IValue(epoch_));
  a.write("permutation", permutation_);
  a.write("epoch_seed", c10::IValue(static_cast<int64_t>(epoch_seed_)));
}

void SeededSampler::load(torch::serialize::InputArchive& a) {
  at::Tensor perm;
  if (!a.try_read("permutation", perm)) return;
  c10::IValue epoch, seed;
  a.read("epoch", epoch);
  a.read("epoch_seed", seed);
  restore(epoch.toInt(), perm.cpu(), static_cast<uint64_t>(seed.toInt()));
}

uint64_t batch_seed(uint64_t epoch_seed, int64_t batch) {
  uint64_t z = epoch_seed + 0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(batch + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

at::Tensor augment(const at::Tensor& images, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution flip(0.5);
  std::uniform_int_distribution<int64_t> shift(-2, 2);
  std::vector<at::Tensor> out;
  out.reserve(images.size(0));
  for (int64_t i = 0; i < images.size(0); ++i) {
    at::Tensor img = images[i];  // (3, S, S)
    if (flip(rng)) img = img.flip({2});
    img = img.roll({shift(rng), shift(rng)}, {1, 2});
    out.push_back(img);
  }
  at::Generator g = seeded_generator(seed ^ 0xA5A5A5A5A5A5A5A5ULL);
  at::Tensor batch = torch::stack(out);                                    // (B, 3, S, S)
  at::Tensor gain = 0.8 + 0.4 * torch::rand({batch.size(0), 1, 1, 1}, g);  // (B, 1, 1, 1)
  return batch * gain + 0.1 * torch::randn(batch.sizes(), g);
}

int64_t default_workers(bool host_trains) {
  return default_workers(host_trains, static_cast<int64_t>(std::thread::hardware_concurrency()));
}

int64_t default_workers(bool host_trains, int64_t cores) {
  cores = std::max<int64_t>(1, cores);  // 0: unknown
  return std::clamp<int64_t>(cores - (host_trains ? 1 : 0), 1, 8);
}

Loader::Loader(int64_t first, int64_t count, LoaderOptions options, MakeBatch make_batch)
    : first_(first), next_(first), count_(count), options_(options), make_batch_(std::move(make_batch)) {
  TORCH_CHECK(options_.workers >= 0, "Loader: workers is ", options_.workers,
              "; resolve -1 with default_workers() first");
  for (int64_t w = 0; w < options_.workers; ++w) threads_.emplace_back([this, w] { work(w); });
}

Loader::~Loader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void Loader::work(int64_t worker) {
  const int64_t first = first_;
  const int64_t capacity = options_.workers * std::max<int64_t>(1, options_.prefetch);
  for (int64_t b = first + worker; b < count_; b += options_.workers) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || b < next_ + capacity; });
      if (stop_) return;
    }
    try {
      Batch batch = make_batch_(b);
      std::lock_guard<std::mutex> lock(mutex_);
      ready_.emplace(b, std::move(batch));
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        failed_.emplace(b, std::current_exception());
      }
      cv_.notify_all();
      return;  // the consumer stops at this batch
    }
    cv_.notify_all();
  }
}

std::optional<Batch> Loader::next() {
  if (next_ >= count_) return std::nullopt;
  if (options_.workers == 0) return make_batch_(next_++);
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return ready_.count(next_) > 0 || failed_.count(next_) > 0; });
  if (auto f = failed_.find(next_); f != failed_.end()) std::rethrow_exception(f->second);
  Batch b = std::move(ready_.at(next_));
  ready_.erase(next_);
  ++next_;
  lock.unlock();
  cv_.notify_all();
  return b;
}

}  // namespace tc::ref
