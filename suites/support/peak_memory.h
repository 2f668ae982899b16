// Peak memory of a region of code: CPU through a counting wrapper around LibTorch's CPU allocator,
// CUDA through the caching allocator's peak statistics. For checks (suites/).
#pragma once

#include <cstdint>
#include <memory>

#include <c10/core/Device.h>

namespace tc {

// While alive, measures bytes allocated on `device` above what was live when it started.
class PeakMemory {
 public:
  explicit PeakMemory(const c10::Device& device);
  ~PeakMemory();
  PeakMemory(const PeakMemory&) = delete;
  PeakMemory& operator=(const PeakMemory&) = delete;

  // Highest live bytes since construction, minus the bytes live at construction.
  int64_t peak_bytes() const;
  // Live bytes now, minus the bytes live at construction.
  int64_t current_bytes() const;
  const char* method() const;

 private:
  c10::Device device_;
  int64_t start_ = 0;
};

}  // namespace tc
