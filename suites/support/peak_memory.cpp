#include "suites/support/peak_memory.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include "harness/contract/cuda_support.h"

namespace tc {
namespace {

// Wraps the CPU allocator: every allocation carries its size to its deleter.
class CountingCPUAllocator final : public c10::Allocator {
 public:
  void install() {
    std::lock_guard<std::mutex> l(mutex_);
    if (installs_++ == 0) {
      base_ = c10::GetCPUAllocator();
      c10::SetCPUAllocator(this, /*priority=*/255);
    }
  }
  void uninstall() {
    std::lock_guard<std::mutex> l(mutex_);
    if (--installs_ == 0) c10::SetCPUAllocator(base_, /*priority=*/255);
  }
  int64_t live() const { return live_.load(); }
  int64_t peak() const { return peak_.load(); }
  void reset_peak() { peak_.store(live_.load()); }

  // A "simple" DataPtr (data == context), as raw_allocate() requires; sizes are kept by pointer.
  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr inner = base_->allocate(n);
    void* data = inner.get();
    c10::DeleterFnPtr deleter = inner.get_deleter();
    void* context = inner.release_context();
    {
      std::lock_guard<std::mutex> l(records_mutex_);
      records_[data] = Record{context, deleter, static_cast<int64_t>(n)};
    }
    const int64_t now = live_.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
    int64_t p = peak_.load();
    while (now > p && !peak_.compare_exchange_weak(p, now)) {
    }
    return {data, data, &CountingCPUAllocator::release, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &CountingCPUAllocator::release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  static CountingCPUAllocator& instance() {
    static CountingCPUAllocator* a = new CountingCPUAllocator();  // never destroyed: outlives tensors
    return *a;
  }

 private:
  struct Record {
    void* context;
    c10::DeleterFnPtr deleter;
    int64_t bytes;
  };
  static void release(void* data) {
    CountingCPUAllocator& self = instance();
    Record r{};
    {
      std::lock_guard<std::mutex> l(self.records_mutex_);
      auto it = self.records_.find(data);
      if (it == self.records_.end()) return;  // not ours (cannot happen: only we hand it out)
      r = it->second;
      self.records_.erase(it);
    }
    self.live_.fetch_sub(r.bytes);
    if (r.deleter) r.deleter(r.context);
  }

  std::mutex records_mutex_;
  std::unordered_map<void*, Record> records_;
  std::mutex mutex_;
  int installs_ = 0;
  c10::Allocator* base_ = nullptr;
  std::atomic<int64_t> live_{0};
  std::atomic<int64_t> peak_{0};
};

}  // namespace

PeakMemory::PeakMemory(const c10::Device& device) : device_(device) {
  if (device_.is_cpu()) {
    auto& a = CountingCPUAllocator::instance();
    a.install();
    a.reset_peak();
    start_ = a.live();
  }
  if (const cuda_support::Api* cuda = cuda_support::api(); device_.is_cuda() && cuda != nullptr) {
    cuda->reset_peak_stats(device_.index() < 0 ? 0 : device_.index());
    start_ = cuda->allocated_bytes(device_.index() < 0 ? 0 : device_.index());
  }
}

PeakMemory::~PeakMemory() {
  if (device_.is_cpu()) CountingCPUAllocator::instance().uninstall();
}

int64_t PeakMemory::peak_bytes() const {
  if (device_.is_cpu()) return CountingCPUAllocator::instance().peak() - start_;
  if (const cuda_support::Api* cuda = cuda_support::api(); device_.is_cuda() && cuda != nullptr) {
    return cuda->peak_allocated_bytes(device_.index() < 0 ? 0 : device_.index()) - start_;
  }
  return -1;
}

int64_t PeakMemory::current_bytes() const {
  if (device_.is_cpu()) return CountingCPUAllocator::instance().live() - start_;
  if (const cuda_support::Api* cuda = cuda_support::api(); device_.is_cuda() && cuda != nullptr) {
    return cuda->allocated_bytes(device_.index() < 0 ? 0 : device_.index()) - start_;
  }
  return -1;
}

const char* PeakMemory::method() const {
  return device_.is_cpu() ? "counting wrapper around LibTorch's CPU allocator (live bytes, peak)"
                          : "CUDA caching allocator statistics (allocated_bytes peak)";
}

}  // namespace tc
