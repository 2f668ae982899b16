// The data-pipeline probe: what the data_saturation check and the loader benchmarks ask of a
// recipe's loader (how long the step loop waits for its next batch, what the workers'
// augmentations are, whether the host-to-device copy is asynchronous).
//
// tc::Run has no loader hooks (a recipe's pipeline is its own business); a recipe that wants its
// loader checked implements LoaderProbe next to tc::Run, as the reference does, and the check
// finds it with dynamic_cast. Recipes without it get a skipped cell with that reason.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include <ATen/core/Tensor.h>

namespace tc {

struct LoaderOptions {
  int64_t workers = -1;  // 0: batches are made on the training thread; -1: default_workers()
  // Batches in flight per worker. 4, as the seeds' DataLoader(prefetch_factor=4): a deeper queue
  // absorbs the host's jitter (measured on a loaded 2-core machine, data_saturation's sweep:
  // 2 workers waited 6-31% in four measurements with depth 2, 1.4% with depth 4).
  int64_t prefetch = 4;
};

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

// A device that takes a batch and holds the step for a fixed time without using a host core, as
// a GPU step leaves the host free while its kernels run: the training thread sleeps.
class SimulatedDevice {
 public:
  explicit SimulatedDevice(std::chrono::microseconds step_time) : step_time_(step_time) {}
  void step() const { std::this_thread::sleep_for(step_time_); }
  std::chrono::microseconds step_time() const { return step_time_; }

 private:
  std::chrono::microseconds step_time_;
};

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
  // On a freshly set-up run: the same for epoch `epoch` (0 is the first), as training reaches it.
  // An augmentation that repeats every epoch shows here. Empty (the default): not provided, and
  // augmentations are compared within one epoch only.
  virtual std::vector<at::Tensor> worker_augmentations_in_epoch(int64_t epoch, int64_t batches) {
    (void)epoch;
    (void)batches;
    return {};
  }
  // After setup() on CUDA: one batch-shaped host tensor of about `bytes` moved the way the
  // recipe's train step moves its batches.
  virtual CopyTiming time_host_to_device_copy(int64_t bytes) = 0;
};

}  // namespace tc
