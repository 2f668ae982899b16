// ReferenceRun's LoaderProbe (reference/reference_run.h): its data pipeline measured on its own,
// with the tools of reference/loader_tools.h. A part of ReferenceRun, apart from those tools, so that
// the tools do not depend on the recipe that uses them.
#include <thread>

#include <torch/cuda.h>
#include <torch/torch.h>

#include "harness/contract/costly_augment.h"
#include "reference/loader_tools.h"
#include "reference/reference_run.h"

namespace tc::ref {

DataWaitStats ReferenceRun::measure_data_wait(const LoaderProbeOptions& o) {
  TORCH_CHECK(data_, "measure_data_wait: call setup() first");
  if (!steps_through_slots()) {
    throw ProbeNotProvided("the recipe's train_step is its own, not ReferenceRun's: the reference's loader "
                           "around its slots would not be the recipe's pipeline; implement "
                           "LoaderProbe::measure_data_wait");
  }
  loader_.reset();
  epoch_ = 0;
  position_ = 0;
  begin_epoch();
  const bool simulated = o.device.has_value();
  const LoaderOptions lo =
      o.loader ? *o.loader : resolved_loader(/*host_trains=*/!simulated && options_.device.is_cpu());
  const int64_t spe = steps_per_epoch();
  const bool cuda = options_.device.is_cuda();
  // Batch i of the stretch is batch i % spe of the epoch: the same work as an epoch's batches,
  // for as many steps as the measurement needs (the dataset has few batches per epoch).
  Loader loader(0, o.warmup_steps + o.steps, lo, [&](int64_t i) {
    Batch b = make_batch(i % spe);
    if (o.extra_augment) {
      b.images = o.extra_augment(b.images);
      if (cuda) b.images = b.images.pin_memory();
    }
    return b;
  });
  std::optional<Batch> current;
  auto next = [&]() -> int64_t {
    current = loader.next();
    return current ? current->images.size(0) : 0;
  };
  auto step = [&] {
    if (simulated) {
      o.device->step();
      return;
    }
    at::Tensor x = to_device(current->images);  // (B, 3, S, S)
    at::Tensor y = to_device(current->labels);  // (B)
    at::Tensor loss = forward_loss(x, y);
    optimisation_step(loss);
    (void)loss.item<double>();  // the step is over when the device is done, as in train_step
  };
  DataWaitStats s = time_data_wait(next, step, o.warmup_steps, o.steps);
  epoch_ = -1;  // the next train_step starts a fresh epoch
  return s;
}

std::vector<at::Tensor> ReferenceRun::worker_augmentations(int64_t batches) {
  return worker_augmentations_in_epoch(0, batches);
}

std::vector<at::Tensor> ReferenceRun::worker_augmentations_in_epoch(int64_t epoch, int64_t batches) {
  TORCH_CHECK(data_, "worker_augmentations: call setup() first");
  loader_.reset();
  position_ = 0;
  for (epoch_ = 0; epoch_ <= epoch; ++epoch_) begin_epoch();  // each epoch draws its seed in turn
  epoch_ = epoch;
  const at::Tensor probe = augmentation_probe_input();  // one fixed input, e.g. (4, 3, S, S)
  {
    // The probe stands for the recipe's batches only where it is laid out as they are.
    const at::Tensor inputs = make_batch(0).images;
    const auto per_sample = [](const at::Tensor& t) {
      return std::string(c10::toString(t.scalar_type())) + c10::str(t.sizes().slice(std::min<size_t>(1, t.dim())));
    };
    if (per_sample(inputs) != per_sample(probe)) {
      epoch_ = -1;
      throw ProbeNotProvided("the augmentation probe's fixed input is laid out " + per_sample(probe) +
                             " per sample, the recipe's batches " + per_sample(inputs) +
                             ": override ReferenceRun::augmentation_probe_input() and augment_batch() for its layout");
    }
  }
  const uint64_t epoch_seed = sampler_->epoch_seed();
  Loader loader(0, batches, resolved_loader(options_.device.is_cpu()), [&](int64_t i) {
    Batch b;
    b.index = i;
    b.images = augment_batch(probe, augmentation_seed(epoch_seed, i));  // on a worker thread
    return b;
  });
  std::vector<at::Tensor> out;
  while (std::optional<Batch> b = loader.next()) out.push_back(b->images);
  epoch_ = -1;
  return out;
}

CopyTiming ReferenceRun::time_host_to_device_copy(int64_t bytes) {
  TORCH_CHECK(options_.device.is_cuda(), "time_host_to_device_copy needs a CUDA device, the run is on ",
              options_.device.str());
  // Host memory as make_batch leaves it on CUDA: pinned.
  at::Tensor host = torch::rand({std::max<int64_t>(1, bytes / 4)}).pin_memory();
  to_device(host);  // warm-up: allocator, context
  torch::cuda::synchronize();
  using Seconds = std::chrono::duration<double>;
  const auto t0 = std::chrono::steady_clock::now();
  at::Tensor dev = to_device(host);
  CopyTiming t;
  t.call_s = Seconds(std::chrono::steady_clock::now() - t0).count();
  torch::cuda::synchronize();
  t.total_s = Seconds(std::chrono::steady_clock::now() - t0).count();
  t.pinned = host.is_pinned();
  return t;
}

}  // namespace tc::ref
