// The distributed probe: what the `distributed` check drives, one process per device under
// torchrun. A recipe that wants its DDP code checked implements DistributedProvider next to
// tc::Run (the reference does: reference/distributed_run.h); the check finds it with dynamic_cast,
// and other recipes get a skipped cell with that reason. Each rank calls, in the same order:
//
//   auto d = provider->make_distributed();
//   d->setup(options, group);            // group: tc::ref::dist::ProcessGroup from torchrun's env
//   for (...) d->train_step();           // forward, backward with gradients averaged, update
//   d->save_checkpoint();                // rank 0 writes, then everyone may read it
//
// The process group is the reference's c10d wrapper (reference/distributed.h), declared here only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "harness/contract/run.h"

namespace tc::ref::dist {
class ProcessGroup;
}

namespace tc {

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
  virtual void setup(const DistRunOptions& options, ref::dist::ProcessGroup& group) = 0;
  virtual int64_t steps_per_epoch() const = 0;
  // Samples in the training set: each epoch must see every index in [0, dataset_size) once.
  virtual int64_t dataset_size() const = 0;
  // One optimisation step of this rank; a new epoch starts when the previous one is exhausted.
  virtual DistStep train_step() = 0;
  virtual NamedTensors parameters() const = 0;
  // The gradients the last step's update used (after averaging), and the batch it computed them on.
  virtual NamedTensors last_gradients() const = 0;
  virtual std::pair<at::Tensor, at::Tensor> last_batch() const = 0;
  // The training loss of `model` on (x, y), computed as train_step computes its loss. `model` is a
  // bare_model() the check loaded with a step's parameters, on the run's device, in train mode; the
  // check backpropagates the loss and reads the gradients itself (what one process training on the
  // concatenated batch computes), so it judges the recipe's gradients against its own.
  virtual at::Tensor training_loss(torch::nn::Module& model, const at::Tensor& x, const at::Tensor& y) = 0;
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

// A recipe whose model is not a LibTorch module (a Python recipe, through the bridge) cannot answer
// bare_model() and training_loss(Module&, ...): it implements this next to DistributedRecipe, and
// the check asks it for one process's gradients instead. (Its checkpoint's model part is read with
// tc::BareModelProbe, harness/contract/state_probes.h, which it implements too.)
struct OneProcessGradients {
  NamedTensors gradients;      // by parameter name, on the CPU
  std::string not_comparable;  // non-empty: why one process cannot compute what the ranks did
                               // (dropout draws other masks per rank; batch norm normalises with
                               // each rank's batch): the gradients are then not judged
};

class DistributedModelProbe {
 public:
  virtual ~DistributedModelProbe() = default;
  // A freshly built bare model loaded with `parameters`, in train mode, the recipe's training loss
  // on (x, y), backpropagated in this one process. Throws std::runtime_error naming what does not
  // fit (a parameter the bare model lacks).
  virtual OneProcessGradients one_process_gradients(const NamedTensors& parameters, const at::Tensor& x,
                                                    const at::Tensor& y) = 0;
};

class DistributedProvider {
 public:
  virtual ~DistributedProvider() = default;
  virtual std::unique_ptr<DistributedRecipe> make_distributed() const = 0;
};

}  // namespace tc
