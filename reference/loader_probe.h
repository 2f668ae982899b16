// The data pipeline measured on its own, for the data_saturation check and the loader
// benchmarks: how long the step loop waits for its next batch, what the workers' augmentations
// are, and whether the host-to-device copy is asynchronous.
//
// tc::Run has no loader hooks (a recipe's pipeline is its own business); a recipe that wants its
// loader checked implements LoaderProbe next to tc::Run, as ReferenceRun does, and the check finds
// it with dynamic_cast. Recipes without it get a skipped cell with that reason.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "reference/data.h"

namespace tc::ref {

// What one measured stretch of the step loop spent waiting for data.
struct DataWaitStats {
  int64_t steps = 0;          // steps measured (after warm-up)
  int64_t warmup_steps = 0;   // steps run first and not counted: the pipeline filling
  double wall_s = 0.0;        // measured steps, wall time
  double wait_s = 0.0;        // of which blocked in the loader's next()
  double warmup_wait_s = 0.0; // wait during warm-up (pipeline fill), reported apart
  int64_t samples = 0;        // samples consumed in the measured steps
  double fraction() const { return wall_s > 0 ? wait_s / wall_s : 0.0; }
  double samples_per_s() const { return wall_s > 0 ? static_cast<double>(samples) / wall_s : 0.0; }
};

// Drives a step loop: `next` blocks until the next batch is there and returns its sample count
// (0: no more batches), `step` consumes it. The time spent in `next` is the data wait.
DataWaitStats time_data_wait(const std::function<int64_t()>& next, const std::function<void()>& step,
                             int64_t warmup_steps, int64_t steps);

// A device that takes a batch and holds the step for a fixed time without using a host core, as
// a GPU step leaves the host free while its kernels run: the training thread sleeps.
class SimulatedDevice {
 public:
  explicit SimulatedDevice(std::chrono::microseconds step_time) : step_time_(step_time) {}
  void step() const;
  std::chrono::microseconds step_time() const { return step_time_; }

 private:
  std::chrono::microseconds step_time_;
};

// A costly, deterministic augmentation for measuring loaders: `rounds` passes of a 5-point blur
// (x + its four one-pixel shifts) / 5 over (B, C, H, W). Elementwise work on small tensors, so it
// stays on the calling thread (under LibTorch's intra-op grain size) and its cost scales with
// `rounds`: a worker making it uses one core.
at::Tensor costly_blur(const at::Tensor& images, int64_t rounds);

struct LoaderProbeOptions {
  std::optional<LoaderOptions> loader;  // measure with these; nullopt: the recipe's own
  int64_t warmup_steps = 3;
  int64_t steps = 30;
  // Extra augmentation work on every batch, on whichever thread makes it (the check's costly
  // augmentation); empty: the recipe's own augmentation only.
  std::function<at::Tensor(const at::Tensor&)> extra_augment;
  // The step that consumes a batch: empty -> the recipe's real train step on its device.
  std::optional<SimulatedDevice> device;
};

struct CopyTiming {
  double call_s = 0.0;   // host time inside the copy call
  double total_s = 0.0;  // until the copy is complete on the device (synchronised)
  bool pinned = false;
};

class LoaderProbe {
 public:
  virtual ~LoaderProbe() = default;
  // After setup(): runs the first epoch's batches through the recipe's loader into `device` (or
  // the real train step) and times the data wait.
  virtual DataWaitStats measure_data_wait(const LoaderProbeOptions& options) = 0;
  // After setup(): the recipe's augmentation of one fixed probe input, once per batch position of
  // the first epoch, each made on the loader's worker threads with that batch's seed.
  virtual std::vector<at::Tensor> worker_augmentations(int64_t batches) = 0;
  // After setup() on CUDA: one batch-shaped host tensor of about `bytes` moved the way the
  // recipe's train step moves its batches.
  virtual CopyTiming time_host_to_device_copy(int64_t bytes) = 0;
};

}  // namespace tc::ref
