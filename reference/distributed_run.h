// Data-parallel training, one process per device under torchrun: the reference's distributed
// practices and the interface the `distributed` check drives (suites/distributed).
//
// A recipe that wants its DDP code checked implements DistributedProvider next to tc::Run, as the
// registered "reference" does (ReferenceRecipe below); the check finds it with dynamic_cast, and
// other recipes get a skipped cell with that reason. Each rank calls, in the same order:
//
//   auto d = provider->make_distributed();
//   d->setup(options, group);            // group: tc::ref::dist::ProcessGroup from torchrun's env
//   for (...) d->train_step();           // forward, backward with gradients averaged, update
//   d->save_checkpoint();                // rank 0 writes, then everyone may read it
//
// Practices (the seeds): DistributedSampler.set_epoch every epoch, gradients averaged by
// all-reduce (c10d's Reducer, as DDP), only rank 0 writes, the unwrapped model is saved, barrier
// after saving.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "reference/distributed.h"
#include "reference/reference_run.h"
#include "reference/run.h"

namespace torch::data::samplers {
class DistributedRandomSampler;
}
namespace torch::nn {
class SequentialImpl;
}

namespace tc::ref {

struct DistRunOptions {
  c10::Device device = c10::Device(c10::kCPU);
  int64_t seed = 0;
  bool quick = false;
  std::string out_dir;  // the same directory on every rank: checkpoints and reports go here
};

struct DistStep {
  int64_t step = 0;
  int64_t epoch = 0;
  double loss = 0.0;                 // this rank's loss
  std::vector<int64_t> samples;      // dataset indices of this rank's batch
};

class DistributedRecipe {
 public:
  virtual ~DistributedRecipe() = default;
  // Every rank, same options: model, optimizer, data, sampler, gradient averaging.
  virtual void setup(const DistRunOptions& options, dist::ProcessGroup& group) = 0;
  virtual int64_t steps_per_epoch() const = 0;
  // Samples in the training set: each epoch must see every index in [0, dataset_size) once.
  virtual int64_t dataset_size() const = 0;
  // One optimisation step of this rank; a new epoch starts when the previous one is exhausted.
  virtual DistStep train_step() = 0;
  virtual NamedTensors parameters() const = 0;
  // The gradients the last step's update used (after averaging), and the batch it computed them on.
  virtual NamedTensors last_gradients() const = 0;
  virtual std::pair<at::Tensor, at::Tensor> last_batch() const = 0;
  // In this process alone: the gradients of the loss over (x, y) at `parameters` (what a single
  // process training on the concatenated batch computes).
  virtual NamedTensors single_process_gradients(const NamedTensors& parameters, const at::Tensor& x,
                                                const at::Tensor& y) = 0;
  // Saves the full training state under out_dir and returns its path (the same on every rank);
  // when it returns, every rank can load it.
  virtual std::string save_checkpoint() = 0;
  // Resumes from a checkpoint save_checkpoint wrote (every rank).
  virtual void load_checkpoint(const std::string& path) = 0;
  // Writes the run's report (losses) under out_dir; returns its path.
  virtual std::string write_report() = 0;
  // A freshly built, unwrapped model: what the checkpoint's "model" part must load into.
  virtual std::shared_ptr<torch::nn::Module> bare_model() = 0;
};

class DistributedProvider {
 public:
  virtual ~DistributedProvider() = default;
  virtual std::unique_ptr<DistributedRecipe> make_distributed() const = 0;
};

// The reference implementation. The model has no BatchNorm and no Dropout: BatchNorm normalises
// with each rank's own batch statistics (DDP without SyncBatchNorm) and Dropout draws other masks,
// so neither could equal one process on the whole batch; GroupNorm is per sample.
class DistributedReference : public DistributedRecipe {
 public:
  DistributedReference();
  ~DistributedReference() override;

  void setup(const DistRunOptions& options, dist::ProcessGroup& group) override;
  int64_t steps_per_epoch() const override;
  int64_t dataset_size() const override { return kDatasetSize; }
  DistStep train_step() override;
  NamedTensors parameters() const override;
  NamedTensors last_gradients() const override;
  std::pair<at::Tensor, at::Tensor> last_batch() const override;
  NamedTensors single_process_gradients(const NamedTensors& parameters, const at::Tensor& x,
                                        const at::Tensor& y) override;
  std::string save_checkpoint() override;
  void load_checkpoint(const std::string& path) override;
  std::string write_report() override;
  std::shared_ptr<torch::nn::Module> bare_model() override;

  int64_t steps_taken() const { return step_; }

  static constexpr int64_t kDatasetSize = 64;
  static constexpr int64_t kBatchPerRank = 8;

 protected:
  // --- practice slots (broken variants replace one) ------------------------------------------
  // Top of each epoch: sampler.set_epoch(epoch), then a fresh pass.
  virtual void begin_epoch(int64_t epoch);
  // Attaches gradient averaging (c10d::Reducer) to the parameters; broadcasts rank 0's weights.
  virtual void attach_gradient_averaging();
  // Whether this rank writes checkpoints and reports: rank 0 only.
  virtual bool writes_files() const;
  // After a rank-0 write: everyone waits until the file is there.
  virtual void after_write();
  // -------------------------------------------------------------------------------------------

  std::shared_ptr<torch::nn::SequentialImpl> build_model() const;
  std::vector<CheckpointPart> checkpoint_parts();

  DistRunOptions options_;
  dist::ProcessGroup* group_ = nullptr;
  std::shared_ptr<SyntheticImages> data_;
  std::unique_ptr<torch::data::samplers::DistributedRandomSampler> sampler_;
  std::shared_ptr<torch::nn::SequentialImpl> model_;
  std::unique_ptr<torch::optim::SGD> optimizer_;
  std::unique_ptr<dist::GradientReducer> reducer_;
  int64_t epoch_ = -1;
  int64_t position_ = 0;
  int64_t step_ = 0;
  std::vector<double> losses_;
  NamedTensors last_gradients_;
  at::Tensor last_x_, last_y_;
};

// The registered "reference" recipe: ReferenceRun for every single-process check, and its
// distributed practices for the `distributed` check.
class ReferenceRecipe : public ReferenceRun, public DistributedProvider {
 public:
  std::unique_ptr<DistributedRecipe> make_distributed() const override {
    return std::make_unique<DistributedReference>();
  }
};

}  // namespace tc::ref
