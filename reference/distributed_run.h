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

#include "harness/contract/distributed_probe.h"
#include "reference/distributed.h"
#include "reference/reference_run.h"
#include "harness/contract/run.h"

namespace torch::data::samplers {
class DistributedRandomSampler;
}
namespace torch::nn {
class SequentialImpl;
}

namespace tc::ref {

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
  at::Tensor training_loss(torch::nn::Module& model, const at::Tensor& x, const at::Tensor& y) override;
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
  // The model, the same weights on every rank (seeded with the run's seed): any module. The
  // reference's is a Sequential; a recipe whose model is not overrides forward() too.
  virtual std::shared_ptr<torch::nn::Module> build_model() const;
  // The model's forward (train and evaluation alike).
  virtual at::Tensor forward(torch::nn::Module& model, const at::Tensor& x);
  // The optimizer over the model's parameters: SGD (lr 0.05, momentum 0.9). Any torch::optim
  // optimizer (its state goes through the checkpoint with Optimizer::save/load).
  virtual std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::vector<at::Tensor>& parameters);
  // The full training state: model, optimizer, progress.
  virtual std::vector<CheckpointPart> checkpoint_parts();
  // -------------------------------------------------------------------------------------------


  DistRunOptions options_;
  dist::ProcessGroup* group_ = nullptr;
  std::shared_ptr<SyntheticImages> data_;
  std::unique_ptr<torch::data::samplers::DistributedRandomSampler> sampler_;
  std::shared_ptr<torch::nn::Module> model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
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
