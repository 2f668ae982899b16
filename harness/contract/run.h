// The recipe API: what a team implements to have torchconform check its own training code.
//
// A recipe is one complete way to train (seeding, model, data, train step, evaluation, checkpoint).
// torchconform's checks drive it only through this interface, so any training code that can
// answer these calls can be checked. Example (see reference/reference_run.h for a full one):
//
//   #include "harness/contract/run.h"
//   #include "harness/contract/registry.h"
//
//   class MyRun : public tc::Run {
//    public:
//     void setup(const tc::RunOptions& o) override { /* seed, build model, optimizer, data */ }
//     tc::StepRecord train_step() override { /* one optimisation step */ }
//     tc::EvalResult evaluate() override { /* eval mode + no grad */ }
//     void save_checkpoint(const std::string& path) override;
//     void load_checkpoint(const std::string& path) override;
//     int64_t steps_per_epoch() const override;
//     tc::NamedTensors parameters() const override;
//     tc::NamedTensors buffers() const override;
//     tc::NamedTensors optimizer_state() const override;
//   };
//   TC_RECIPE(MyRun, "my_recipe", "our production training loop");
//
// Then `torchconform run --recipe my_recipe` runs every check on it. From a project of your own,
// against the installed package: find_package(torchconform) and link your recipe's TU with
// torchconform::suite, which gives the whole command line (examples/user_recipe/ is a complete one).
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "harness/contract/registry.h"

namespace torch::optim {
class Optimizer;
}
namespace torch::nn {
class Module;
}

namespace tc {

struct RunOptions {
  c10::Device device = c10::Device(c10::kCPU);
  int64_t seed = 0;
  bool deterministic = true;  // deterministic algorithms (checks of bitwise equality need it)
  bool quick = false;
  bool activation_checkpointing = false;  // recompute activations in backward (gradient checkpointing)
};

struct StepRecord {
  int64_t step = 0;        // global step index, from 0
  int64_t epoch = 0;
  double loss = 0.0;       // the loss of this step's forward, before the update
  double lr = 0.0;         // the learning rate this step used
  bool training_mode = false;  // model.is_training() during the step
};

// What evaluation measured, for any task: a classifier's (loss, accuracy, logits (N, classes)), a
// regression's or a language model's (loss, its outputs; has_accuracy false). The checks compare the
// loss and the outputs; the accuracy where there is one.
struct EvalResult {
  double loss = 0.0;
  double accuracy = 0.0;   // a classifier's; read only where has_accuracy
  at::Tensor logits;       // the model's outputs on every evaluated sample, in order ((N, classes) for a classifier)
  bool has_accuracy = true;  // false: the task has no accuracy (regression, sequence models)
};

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// How a parameter is declared to be initialised (the init check compares against it).
struct InitSpec {
  enum class Kind { kNormal, kUniform, kConstant, kTruncatedNormal };
  std::string parameter;  // name as in parameters()
  Kind kind = Kind::kConstant;
  double a = 0.0;  // normal, truncated normal: mean; uniform: low; constant: value
  double b = 0.0;  // normal, truncated normal: std; uniform: high
  // Truncated normal: the cutoffs, absolute values (torch.nn.init.trunc_normal_'s a and b, e.g.
  // -2 and 2 for its default; ViT-style inits use mean 0, std 0.02 cut at +-2 std).
  double low = 0.0, high = 0.0;
};

// Thrown by the optional probes below when a recipe does not provide them: cells that need the
// probe are skipped with this message as the reason.
class ProbeNotProvided : public SkipCell {
 public:
  using SkipCell::SkipCell;
};

class Run {
 public:
  virtual ~Run() = default;

  // Fresh state: seed (with options.seed), build model, optimizer, scheduler and data.
  virtual void setup(const RunOptions& options) = 0;
  // One optimisation step; a new epoch starts when the previous one is exhausted.
  virtual StepRecord train_step() = 0;
  // Evaluates on held-out data.
  virtual EvalResult evaluate() = 0;
  // Everything needed to resume exactly; loading into a freshly set-up run continues the run.
  virtual void save_checkpoint(const std::string& path) = 0;
  virtual void load_checkpoint(const std::string& path) = 0;

  virtual int64_t steps_per_epoch() const = 0;
  // Views of the live tensors (checks clone what they keep), in a stable order.
  virtual NamedTensors parameters() const = 0;
  virtual NamedTensors buffers() const = 0;
  virtual NamedTensors optimizer_state() const = 0;

  // --- optional probes (defaults throw ProbeNotProvided) ------------------------------------------
  // A batch of model inputs on the run's device, e.g. (B, 3, S, S).
  virtual at::Tensor example_input(int64_t batch) const;
  // The model's output for x in eval mode without autograd; leaves the model's mode as it was.
  virtual at::Tensor predict(const at::Tensor& x);
  // The model's output for x in train mode with autograd (for gradient and memory probes).
  virtual at::Tensor forward_train(const at::Tensor& x);
  // The last train_step's batch as its forward received it, on the run's device: the inputs (a
  // copy taken before the forward, so nothing the step did to them afterwards shows) and the
  // targets. With forward_train and training_loss, a check recomputes that step's gradient.
  virtual std::pair<at::Tensor, at::Tensor> last_batch() const;
  // The loss train_step backpropagates for a model output and its targets (any loss weight
  // included), computed afresh.
  virtual at::Tensor training_loss(const at::Tensor& output, const at::Tensor& target);
  // The optimizer the train step uses, and the gradient-norm bound it clips to (0: none).
  virtual torch::optim::Optimizer& optimizer();
  virtual double clip_norm() const;
  // How each parameter is initialised.
  virtual std::vector<InitSpec> declared_init() const;
  // A freshly built, unwrapped model (on the CPU): what a checkpoint's model state must load into.
  virtual std::shared_ptr<torch::nn::Module> bare_model();
  // Whether RunOptions::activation_checkpointing does anything here: false for a recipe whose model
  // has no checkpointed segment (grad_checkpointing skips its cell, naming this). A recipe that
  // accepts the option and ignores it still answers true: that is the mistake the check catches.
  virtual bool does_activation_checkpointing() const { return true; }
};

}  // namespace tc
