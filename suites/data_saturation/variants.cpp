// Broken variants the data_saturation check must catch ("Keep the GPU fed").
#include "harness/contract/registry.h"
#include "reference/reference_run.h"

namespace tc::variants {
namespace {

ref::TrainConfig with_workers(int64_t workers) {
  ref::TrainConfig c;
  c.loader.workers = workers;
  return c;
}

}  // namespace

// Fail: `DataLoader(dataset, batch_size=32)`: no workers, every batch made on the training thread
// between steps.
class WorkersZero : public ref::ReferenceRun {
 public:
  WorkersZero() : ReferenceRun(with_workers(0)) {}
};

// Pinned host memory copied without non_blocking: the copy holds the host until it is done, so
// pinning buys nothing ("pin_memory=True pays off only with non_blocking=True").
class PinWithoutNonBlocking : public ref::ReferenceRun {
 protected:
  at::Tensor to_device(const at::Tensor& host) override {
    return host.to(options_.device, /*non_blocking=*/false);
  }
};

// Fail: the sampler's order drawn once: `set_epoch` called for the first epoch only (a custom
// sampler that permutes in its constructor does the same), so every epoch repeats the first's order.
class OrderDrawnOnce : public ref::ReferenceRun {
 protected:
  void begin_epoch() override {
    module_->train();
    if (!sampler_->has_epoch()) sampler_->set_epoch(epoch_);
  }
};

}  // namespace tc::variants

TC_RECIPE(tc::variants::WorkersZero, "workers_0",
          "the loader has no workers: batches are made on the training thread")
    ->MustBeCaughtBy({"data_saturation"})
    ->Breaks("data_saturation", {"data_wait"});
TC_RECIPE(tc::variants::PinWithoutNonBlocking, "pin_without_non_blocking",
          "batches are pinned but copied to the device without non_blocking")
    ->MustBeCaughtBy({"data_saturation"})
    ->Breaks("data_saturation", {"async_copy"})
    ->Needs("cuda");
TC_RECIPE(tc::variants::OrderDrawnOnce, "order_drawn_once",
          "the sampler's order is drawn for the first epoch only: every epoch repeats it")
    ->MustBeCaughtBy({"data_saturation"})
    ->Breaks("data_saturation", {"epoch_order", "worker_augmentations"});
