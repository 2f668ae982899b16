// The reference recipe: every practice of the seeds done right, and the base a team's recipe may
// derive from (public API, installed). Broken variants derive from ReferenceRun and replace exactly
// one of the protected slots below, the way the seeds' "Fail:" code does (suites/<check>/variants.cpp).
//
// The slots a real training loop varies, each used by every check through tc::Run:
//   make_model()      the model: any torch::nn::Module (with model_forward() when it is not the
//                     reference's ImageClassifier; build_model() makes one of those)
//   make_optimizer()  any torch::optim optimizer (SGD, Adam, AdamW, RMSprop, Adagrad, ...): its
//                     state goes through the checkpoint (Optimizer::save/load) and optimizer_state()
//   make_schedule()   any learning-rate schedule with its state (reference/schedule.h)
//   make_sampler()    which samples make each batch (reference/data.h Sampler); the dataset size,
//                     batch size and drop_last come from TrainConfig (an uneven last batch when
//                     drop_last is off and the batch size does not divide the dataset)
//   make_optimizer_for()  the same with the parameters' names (a no-decay group chosen by name)
//   make_sampler_for()    the same with the training labels (a class-balanced sampler)
//   after_step()      after each step and its schedule step (an EMA of the weights)
//   loss_of()         the loss of the output for the targets (a custom loss), used everywhere
//   augment_batch(), augmentation_probe_input()  a batch's augmentation and the probe's fixed input
//   forward_loss(), amp_forward(), optimisation_step(), make_grad_scaler(), begin_epoch(),
//   to_device(), make_batch(), eval_loop(), checkpoint_parts(), seed_everything(): the practices.
// Schedules: reference/schedule.h (ConstantLR, PerEpoch<S>, WarmupCosine, Resumable<S>); a model
// that keeps LibTorch's initialisation declares it with libtorch_default_init() (reference/model.h).
// Recipes on each of these slots, every check that applies passing and a variant on each caught:
// suites/tests/written_differently_test.cpp (LoopSlots, AccumulatedMicroBatches).
// An AdamW recipe with a warm-up + cosine schedule and an uneven last batch, every check passing:
// suites/tests/slots_test.cpp.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <torch/nn/modules/loss.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

#include "harness/contract/amp_probe.h"
#include "reference/grad_scaler.h"
#include "reference/checkpoint.h"
#include "reference/data.h"
#include "reference/loader_tools.h"
#include "reference/model.h"
#include "harness/contract/run.h"
#include "reference/schedule.h"
#include "reference/seed.h"

namespace tc::ref {

struct TrainConfig {
  DataOptions data{};  // data.size: the training set's size
  DataOptions eval_data{64, 4, 16, 777};
  int64_t batch_size = 16;
  // Drop the last batch when batch_size does not divide the dataset (on: every batch is full).
  bool drop_last = true;
  int64_t eval_batch_size = 32;
  LoaderOptions loader{};
  double lr = 0.05;
  double momentum = 0.9;
  double weight_decay = 5e-4;
  // The default schedule (make_schedule): StepLR, decaying by lr_gamma every lr_step_size steps.
  unsigned lr_step_size = 3;
  double lr_gamma = 0.8;
  double clip_norm = 1.0;
  double dropout = 0.5;
};

class ReferenceRun : public Run, public LoaderProbe, public AmpProbe {
 public:
  explicit ReferenceRun(TrainConfig config = {}) : config_(std::move(config)) {}

  void setup(const RunOptions& options) override;
  StepRecord train_step() override;
  EvalResult evaluate() override;
  void save_checkpoint(const std::string& path) override;
  void load_checkpoint(const std::string& path) override;
  int64_t steps_per_epoch() const override;
  NamedTensors parameters() const override;
  NamedTensors buffers() const override;
  NamedTensors optimizer_state() const override;

  at::Tensor example_input(int64_t batch) const override;
  at::Tensor predict(const at::Tensor& x) override;
  at::Tensor forward_train(const at::Tensor& x) override;
  std::pair<at::Tensor, at::Tensor> last_batch() const override { return last_batch_; }
  at::Tensor training_loss(const at::Tensor& output, const at::Tensor& target) override;
  torch::optim::Optimizer& optimizer() override { return *optimizer_; }
  double clip_norm() const override { return config_.clip_norm; }
  std::vector<InitSpec> declared_init() const override;
  std::shared_ptr<torch::nn::Module> bare_model() override;
  // The reference's classifier recomputes its features when the option asks (recompute_features);
  // a model of make_model() has no checkpointed segment unless the recipe says so by overriding this.
  bool does_activation_checkpointing() const override { return !model_.is_empty(); }

  // Read by no check, example or test: deprecated in 0.4, kept in 0.5 for the 0.3 and 0.4 projects it
  // still builds, removed in 0.6 (docs/api.md's contract).
  [[deprecated("unused; removed in torchconform 0.6: the seeds are the ones seed_everything() was given")]]
  const SeedRecord& seed_record() const { return seed_record_; }

  // LoaderProbe (reference/reference_run_loader.cpp): the data pipeline measured on its own.
  DataWaitStats measure_data_wait(const LoaderProbeOptions& options) override;
  std::vector<at::Tensor> worker_augmentations(int64_t batches) override;
  std::vector<at::Tensor> worker_augmentations_in_epoch(int64_t epoch, int64_t batches) override;
  CopyTiming time_host_to_device_copy(int64_t bytes) override;

  // AmpProbe: mixed precision is off unless set_amp() asks for it before setup(). On: the forward
  // and loss under autocast to that dtype; for fp16 a GradScaler (PyTorch's defaults), the
  // gradients unscaled before clipping; bf16 needs no scaler (fp32's exponent range).
  void set_amp(const AmpOptions& options) override { amp_ = options; }
  void set_after_backward(std::function<void(const NamedTensors&)> hook) override {
    after_backward_ = std::move(hook);
  }
  std::optional<GradScalerState> scaler_state() const override;
  // The recipe's own procedure on another model: amp_forward() around the workload's forward and
  // loss, then the recipe's optimisation_step() with an optimizer from make_optimizer(), a schedule
  // from make_schedule() and a scaler from make_grad_scaler() for the workload's parameters, held in
  // this instance's own members (the instance is given over to the workload: AmpProbe). A recipe that
  // replaces train_step() has its own procedure, which this cannot apply: it returns an empty
  // function (the speed is recorded as not measured) unless the recipe overrides amp_step_on too. It
  // first runs one train_step() to see which is the case.
  std::function<double()> amp_step_on(const AmpWorkload& workload) override;
  // micro_batch_sizes(batch): amp_step_on's step splits the workload's batch as train_step() does.
  std::vector<int64_t> amp_micro_batches(int64_t batch) const override { return micro_batch_sizes(batch); }

 protected:
  // --- practice slots -------------------------------------------------------------------------
  // Seeds everything, the loader's generator included, and records determinism.
  virtual void seed_everything();
  // The model, built anew on every call: any module, explicitly initialised. setup() keeps the one
  // it trains (module_; typed through model_as<T>()), bare_model() returns another. const, so that
  // it keeps nothing: a model kept in a member of the recipe would be replaced by bare_model()'s
  // call without a word. Its default is make_model() (0.4's slot). A model that is not an
  // ImageClassifier overrides model_forward() too (and declared_init() to have init checked).
  virtual std::shared_ptr<torch::nn::Module> new_model() const;
  // 0.4's model slot, new_model()'s default: build_model()'s classifier. Prefer new_model().
  virtual std::shared_ptr<torch::nn::Module> make_model();
  // The reference's classifier (or one derived from it: reference/derived_model.h), built in its
  // constructor and explicitly initialised; make_model()'s default.
  virtual ImageClassifier build_model();
  // The model's forward, train and evaluation alike: model_->forward(x) for an ImageClassifier.
  virtual at::Tensor model_forward(const at::Tensor& x);
  // The optimizer over the model's parameters: SGD (config lr, momentum, weight decay). Any
  // torch::optim optimizer; also made for amp_step_on's workload.
  virtual std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::vector<at::Tensor>& parameters);
  // The same with the parameters' names (model.named_parameters()), for groups chosen by name (no
  // weight decay on biases and norms). setup() calls this one; its default is make_optimizer() of
  // the tensors, so a recipe overrides one or the other.
  virtual std::unique_ptr<torch::optim::Optimizer> make_optimizer_for(const NamedTensors& named_parameters);
  // The learning-rate schedule, stepped after every optimisation step: StepLR (config lr_step_size,
  // lr_gamma), resumable. Any Schedule (reference/schedule.h: WarmupCosine, Resumable<S>).
  virtual std::unique_ptr<Schedule> make_schedule(torch::optim::Optimizer& optimizer);
  // The training sampler: SeededSampler over the dataset with config batch_size and drop_last,
  // shuffling with the loader's seeded generator.
  virtual std::unique_ptr<Sampler> make_sampler(int64_t dataset_size, at::Generator generator);
  // The same with the training set's labels ((N) int64, on the CPU), for a class-aware sampler.
  // setup() calls this one, after the data and before make_model(); its default is make_sampler().
  virtual std::unique_ptr<Sampler> make_sampler_for(int64_t dataset_size, at::Generator generator,
                                                    const at::Tensor& labels);
  // Forward and loss for one batch already on the device: amp_forward() around the model's forward
  // and cross-entropy, times amp_.loss_weight.
  virtual at::Tensor forward_loss(const at::Tensor& x, const at::Tensor& y);
  // The training loss of the model's output for the targets: cross-entropy. A custom loss (label
  // smoothing, a focal loss) overrides this one slot: forward_loss(), training_loss() (what the
  // checks recompute) and amp's timing of the recipe's procedure (on a classifier's logits (B,
  // classes) and class targets (B)) all call it, inside the autocast region where there is one.
  virtual at::Tensor loss_of(const at::Tensor& output, const at::Tensor& target);
  // The mixed-precision procedure around one forward + loss, of the recipe's own model or of a
  // workload (amp_step_on): loss_of(x) under autocast for the device in use in amp_.dtype, when
  // mixed precision is on.
  virtual at::Tensor amp_forward(const std::function<at::Tensor(const at::Tensor&)>& loss_of, const at::Tensor& x);
  // zero_grad(set_to_none) -> backward(loss) -> unscale_ -> clip -> step -> update.
  virtual void optimisation_step(const at::Tensor& loss);
  // Gradient accumulation: the sizes the step's batch is split into, in order (default: {batch},
  // none). With more than one, train_step() and amp's timing of the recipe (amp_step_on) hand
  // optimisation_step() an undefined loss, and its backward() runs each micro-batch in turn:
  // forward_loss() of the micro-batch, weighed by weigh_micro_batch(), backward_micro_batch(), so
  // one micro-batch's graph is freed before the next is built; the step follows the last. The
  // step's reported loss is the sum of the weighed losses. even_split() gives near-equal sizes.
  virtual std::vector<int64_t> micro_batch_sizes(int64_t batch) const { return {batch}; }
  // A micro-batch's loss as it enters the step's gradient: its mean loss times its share of the
  // batch (n / batch), so uneven micro-batches add up to the whole batch's mean-loss gradient.
  virtual at::Tensor weigh_micro_batch(const at::Tensor& loss, int64_t n, int64_t batch);
  // The backward of one loss (the whole batch's, or a weighed micro-batch's): of the loss scaled by
  // the gradient scaler.
  virtual void backward_micro_batch(const at::Tensor& loss);
  // `batch` split into `parts` contiguous sizes as near equal as can be, the first ones one larger
  // (torch.tensor_split's split): 16 into 3 is {6, 5, 5}.
  static std::vector<int64_t> even_split(int64_t batch, int64_t parts);
  // The gradient scaler: PyTorch's defaults (amp_.scaler), enabled for fp16 only.
  virtual std::unique_ptr<GradScaler> make_grad_scaler();
  // After every optimisation step and its schedule step, in train_step(): an exponential moving
  // average of the weights (EMA), a log. Its state belongs in checkpoint_parts().
  virtual void after_step() {}
  // The seed a batch's augmentation draws from (called on worker threads).
  virtual uint64_t augmentation_seed(uint64_t epoch_seed, int64_t batch) const;
  // The augmentation of a batch's inputs with its seed (on worker threads): the reference's flips,
  // shifts, gain and noise of (B, 3, S, S) images. make_batch() applies it, and so does the
  // augmentation probe (data_saturation's worker seeding) to augmentation_probe_input().
  virtual at::Tensor augment_batch(const at::Tensor& inputs, uint64_t seed) const;
  // One fixed input for the augmentation probe, laid out as make_batch()'s inputs before the
  // augmentation: four of the training set's images. A recipe whose make_batch() makes another
  // layout (rows, token ids) overrides this and augment_batch(); where the probe's input and batch
  // 0's inputs differ in per-sample shape or dtype, the probe is not provided (the cell skips
  // naming both layouts) rather than measuring the reference's augmentation.
  virtual at::Tensor augmentation_probe_input() const;
  // Top of each training epoch: model.train(), sampler.set_epoch(epoch).
  virtual void begin_epoch();
  // Host batch -> device: pinned memory copied with non_blocking (called on the training thread).
  virtual at::Tensor to_device(const at::Tensor& host);
  // The full training state: model, optimizer, scheduler, progress, RNG states, sampler position.
  virtual std::vector<CheckpointPart> checkpoint_parts();
  // ----------------------------------------------------------------------------------------------

  bool amp_on() const { return amp_.dtype != c10::kFloat; }
  // The model setup() keeps (new_model()'s) as its own type, e.g. model_as<MyNetImpl>().forward(x)
  // in model_forward(); a clear error when it is another type.
  template <class T>
  T& model_as() const {
    T* typed = dynamic_cast<T*>(module_.get());
    TORCH_CHECK(typed != nullptr, "model_as<T>(): the model from new_model() is a ",
                module_ ? module_->name() : std::string("null module"), ", not the type asked for");
    return *typed;
  }
  // What load_checkpoint() does once the parts are read: the loader restarted at the saved position
  // (the saved epoch from its start when the sampler kept none). A recipe whose load_checkpoint()
  // reads a file layout of its own calls it after restoring its parts.
  void after_loading_parts();
  void after_backward();
  // The backward of the step, in optimisation_step(): backward_micro_batch(loss), or with
  // micro-batches (loss undefined) each micro-batch's forward, weighing and backward in turn.
  void backward(const at::Tensor& loss);
  // The parameters optimisation_step() clips: the model's, or the workload's inside amp_step_on.
  std::vector<at::Tensor> step_parameters() const;
  // Whether train_step() is ReferenceRun's (an override that calls it counts): the probes that run
  // the recipe's slots in the reference's loop (amp_step_on, measure_data_wait) measure the recipe
  // only then. Runs one train_step() to see, unless one already went through the slots.
  bool steps_through_slots();

  // The evaluation loop shared by evaluate() and its variants: forward every held-out batch.
  virtual EvalResult eval_loop();
  // Batch `index` of the current epoch, made on a loader worker: the sampler's indices, the
  // augmentation with augmentation_seed(), pinned on CUDA.
  virtual Batch make_batch(int64_t index) const;
  void start_loader(int64_t first);
  // The loader options with the worker count resolved (-1: default_workers for this device).
  LoaderOptions resolved_loader(bool host_trains) const;

  TrainConfig config_;
  RunOptions options_;
  SeedRecord seed_record_;
  std::shared_ptr<SyntheticImages> data_;
  std::shared_ptr<SyntheticImages> eval_data_;
  at::Generator loader_generator_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<Loader> loader_;
  std::shared_ptr<torch::nn::Module> module_;  // the model (make_model)
  ImageClassifier model_{nullptr};             // the same model when it is an ImageClassifier, else null
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<Schedule> scheduler_;
  int64_t epoch_ = -1;    // current epoch, -1 before the first
  int64_t position_ = 0;  // batches consumed in the current epoch
  int64_t step_ = 0;      // optimisation steps taken
  std::pair<at::Tensor, at::Tensor> last_batch_;  // the last step's inputs (copied before the forward), targets
  AmpOptions amp_;
  std::unique_ptr<GradScaler> scaler_;
  std::function<void(const NamedTensors&)> after_backward_;

 private:
  std::optional<std::vector<at::Tensor>> step_parameters_;  // set inside amp_step_on's step
  int64_t slot_steps_ = 0;  // optimisation_step() calls made by ReferenceRun::train_step
  // The step's micro-batches waiting for backward(): their sizes, the loss of the micro-batch at
  // (start, n), and the sum of the weighed losses once backward() has run them.
  struct MicroBatches {
    std::vector<int64_t> sizes;
    int64_t batch = 0;
    std::function<at::Tensor(int64_t, int64_t)> loss;
    at::Tensor reported;
  };
  std::optional<MicroBatches> micro_batches_;
  // The step's loss: loss(0, batch) without accumulation; with micro-batches (micro_batch_sizes())
  // an undefined tensor, the micro-batches left for backward().
  at::Tensor step_loss(int64_t batch, std::function<at::Tensor(int64_t, int64_t)> loss);
  // The loss the step reports: `loss` when defined, else the micro-batches' sum (after backward()).
  at::Tensor reported_loss(const at::Tensor& loss);
};

}  // namespace tc::ref
