// The checks on training code written otherwise than the reference, by mechanisms the suite's own
// recipes do not use: correct recipes must pass every check that judges them; a recipe broken in
// a path the checks once left unexercised is caught by the check that owns it.
//
// Classes (issue 24): frozen parameters; checkpoints in layouts other than the reference's; an
// update the optimizer does not make alone; random numbers drawn outside the forward; learnable
// state outside the module tree; state only evaluation uses.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "harness/contract/registry.h"
#include "harness/runner.h"
#include "reference/derived_model.h"
#include "reference/reference_run.h"
#include "suites/resume_equality/variants.h"
#include "suites/tests/test_recipes.h"

namespace tc {
namespace {

using testing_recipes::expect_nothing_broken;
using testing_recipes::make;
using testing_recipes::promise_status;
using testing_recipes::run_one;

// --- correct recipes ------------------------------------------------------------------------------

// Fine-tuning: the stem (first conv and its BatchNorm) is frozen with requires_grad(false); the
// optimizer still holds every parameter, as `model.parameters()` gives them.
class FrozenStem : public ref::ReferenceRun {
 protected:
  ref::ImageClassifier build_model() override {
    ref::ImageClassifier m = ReferenceRun::build_model();
    for (auto& p : m->features[0]->parameters()) p.requires_grad_(false);
    for (auto& p : m->features[1]->parameters()) p.requires_grad_(false);
    return m;
  }
};

// The model part of the checkpoint as one Dict[str, Tensor] entry (a state dict), loaded by name.
class DictStateCheckpoint : public ref::ReferenceRun {
 protected:
  std::vector<ref::CheckpointPart> checkpoint_parts() override {
    std::vector<ref::CheckpointPart> parts = ReferenceRun::checkpoint_parts();
    parts.at(0) = {"model",
                   [this](torch::serialize::OutputArchive& a) {
                     c10::Dict<std::string, at::Tensor> d;
                     for (const auto& p : model_->named_parameters()) d.insert(p.key(), p.value().detach());
                     for (const auto& b : model_->named_buffers()) d.insert(b.key(), b.value());
                     a.write("state_dict", c10::IValue(d));
                   },
                   [this](torch::serialize::InputArchive& a) {
                     c10::IValue v;
                     a.read("state_dict", v);
                     const auto d = v.toGenericDict();
                     torch::NoGradGuard no_grad;
                     for (auto& p : model_->named_parameters()) p.value().copy_(d.at(p.key()).toTensor());
                     for (auto& b : model_->named_buffers()) b.value().copy_(d.at(b.key()).toTensor());
                   }};
    return parts;
  }
};

// The model part with PyTorch's flat keys ("features.0.weight") at its top level, not nested.
class FlatKeyCheckpoint : public ref::ReferenceRun {
 protected:
  std::vector<ref::CheckpointPart> checkpoint_parts() override {
    std::vector<ref::CheckpointPart> parts = ReferenceRun::checkpoint_parts();
    parts.at(0) = {"model",
                   [this](torch::serialize::OutputArchive& a) {
                     for (const auto& p : model_->named_parameters()) a.write(p.key(), p.value().detach());
                     for (const auto& b : model_->named_buffers()) a.write(b.key(), b.value(), /*is_buffer=*/true);
                   },
                   [this](torch::serialize::InputArchive& a) {
                     torch::NoGradGuard no_grad;
                     for (auto& p : model_->named_parameters()) {
                       at::Tensor t;  // a fresh handle each time: read() into a defined tensor set_()s it
                       a.read(p.key(), t);
                       p.value().copy_(t);
                     }
                     for (auto& b : model_->named_buffers()) {
                       at::Tensor t;
                       a.read(b.key(), t, /*is_buffer=*/true);
                       b.value().copy_(t);
                     }
                   }};
    return parts;
  }
};

// Decoupled weight decay by hand (as AdamW does it): the optimizer has weight decay 0 and the
// recipe shrinks every parameter by lr * wd after the step.
class DecoupledDecayByHand : public ref::ReferenceRun {
 public:
  DecoupledDecayByHand() : ReferenceRun(config()) {}

 protected:
  static ref::TrainConfig config() {
    ref::TrainConfig c;
    c.weight_decay = 0.0;
    return c;
  }
  void optimisation_step(const at::Tensor& loss) override {
    const double lr = optimizer_->param_groups().at(0).options().get_lr();
    ReferenceRun::optimisation_step(loss);
    torch::NoGradGuard no_grad;
    for (auto& p : model_->parameters()) p.mul_(1.0 - lr * kDecay);
  }
  static constexpr double kDecay = 5e-4;
};

// Augmentation on the device: a random horizontal flip of each image, drawn from the global
// generator on the training thread after the copy (before the forward, so the step draws random
// numbers its forward does not).
class DeviceFlip : public ref::ReferenceRun {
 protected:
  at::Tensor to_device(const at::Tensor& host) override {
    at::Tensor t = ReferenceRun::to_device(host);
    if (t.dim() != 4) return t;
    const at::Tensor flip = torch::rand({t.size(0)}, t.options().dtype(torch::kFloat)) < 0.5;  // (B)
    return torch::where(flip.view({-1, 1, 1, 1}), t.flip({3}), t);
  }
};

// Workers made otherwise: three workers with two batches in flight each (the reference: its
// default count, four in flight).
class ThreeShallowWorkers : public ref::ReferenceRun {
 public:
  ThreeShallowWorkers() : ReferenceRun(config()) {}

 private:
  static ref::TrainConfig config() {
    ref::TrainConfig c;
    c.loader.workers = 3;
    c.loader.prefetch = 2;
    return c;
  }
};

// Each batch's augmentation seed mixed from (epoch seed, batch) by a hash of its own (a
// multiply-xorshift), not the reference's: other numbers, as distinct and as deterministic.
class OwnSeedHash : public ref::ReferenceRun {
 protected:
  uint64_t augmentation_seed(uint64_t epoch_seed, int64_t batch) const override {
    uint64_t h = epoch_seed ^ (static_cast<uint64_t>(batch) * 0x9E3779B97F4A7C15ull);
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 29);
  }
};

// The classifier's input flattened by reshape, and by contiguous() + view: both correct on a
// channels_last activation (view alone is not).
template <bool Reshape>
struct FlattenOtherwiseImpl : ref::ImageClassifierImpl {
  using ImageClassifierImpl::ImageClassifierImpl;
  torch::Tensor forward(torch::Tensor x) override {
    x = extract_features(x);  // (B, C, H/2, W/2)
    x = Reshape ? x.reshape({x.size(0), -1}) : x.contiguous().view({x.size(0), -1});  // (B, C*H/2*W/2)
    return classifier->forward(x);
  }
};
template <bool Reshape>
class FlattenOtherwise : public ref::ReferenceRun {
 protected:
  ref::ImageClassifier build_model() override {
    return ref::make_classifier<FlattenOtherwiseImpl<Reshape>>(config_.data.classes, config_.data.image_size,
                                                              config_.dropout);
  }
};

// Label smoothing (0.1) with the smoothed targets built on the device of the logits, and the loss
// written out (log_softmax against them): every tensor the step makes follows its inputs' device.
class SmoothedTargetsOnDevice : public ref::ReferenceRun {
 protected:
  at::Tensor forward_loss(const at::Tensor& x, const at::Tensor& y) override { return smoothed(model_->forward(x), y); }

 public:
  at::Tensor training_loss(const at::Tensor& output, const at::Tensor& target) override { return smoothed(output, target); }

 private:
  static at::Tensor smoothed(const at::Tensor& logits, const at::Tensor& y) {
    const int64_t k = logits.size(1);
    const at::Tensor t = torch::full_like(logits, 0.1 / static_cast<double>(k))
                             .scatter_(1, y.unsqueeze(1), 0.9 + 0.1 / static_cast<double>(k));  // (B, k)
    return -(t * torch::log_softmax(logits, 1)).sum(1).mean();
  }
};

// --- broken recipes -------------------------------------------------------------------------------

// A learnable temperature on the logits, held by the model as a plain member tensor where
// register_parameter was forgotten: it requires grad and takes part in every loss, but no optimizer
// holds it and no state dict saves it (it stays 1.0, which is why no output shows it).
struct TemperatureImpl : ref::ImageClassifierImpl {
  using ImageClassifierImpl::ImageClassifierImpl;
  torch::Tensor forward(torch::Tensor x) override { return ImageClassifierImpl::forward(x) / temperature; }
  torch::Tensor temperature = torch::ones({}).requires_grad_(true);
};
class UnregisteredTemperature : public ref::ReferenceRun {
 protected:
  ref::ImageClassifier build_model() override {
    return ref::make_classifier<TemperatureImpl>(config_.data.classes, config_.data.image_size, config_.dropout);
  }
};

// Evaluation on an exponential moving average of the weights (kept beside the model, updated after
// every step). `Saved` puts the average in the checkpoint; otherwise a resumed run starts it over.
template <bool Saved>
class EmaEvaluation : public ref::ReferenceRun {
 public:
  EvalResult evaluate() override {
    if (ema_.empty()) return ReferenceRun::evaluate();
    torch::NoGradGuard no_grad;
    const NamedTensors live = snapshot_live();
    copy_params(ema_);
    EvalResult r = ReferenceRun::evaluate();
    copy_params(live);
    return r;
  }

 protected:
  void optimisation_step(const at::Tensor& loss) override {
    ReferenceRun::optimisation_step(loss);
    torch::NoGradGuard no_grad;
    if (ema_.empty()) {
      for (const auto& p : model_->named_parameters()) ema_.emplace_back(p.key(), p.value().detach().clone());
      return;
    }
    size_t i = 0;
    for (const auto& p : model_->named_parameters()) ema_[i++].second.mul_(0.9).add_(p.value().detach(), 0.1);
  }
  std::vector<ref::CheckpointPart> checkpoint_parts() override {
    std::vector<ref::CheckpointPart> parts = ReferenceRun::checkpoint_parts();
    if (!Saved) return parts;
    parts.push_back({"ema",
                     [this](torch::serialize::OutputArchive& a) {
                       for (const auto& [n, t] : ema_) a.write(n, t);
                     },
                     [this](torch::serialize::InputArchive& a) {
                       ema_.clear();
                       for (const auto& p : model_->named_parameters()) {
                         at::Tensor t;
                         if (a.try_read(p.key(), t)) ema_.emplace_back(p.key(), t.to(options_.device));
                       }
                     }});
    return parts;
  }

 private:
  NamedTensors snapshot_live() const {
    NamedTensors out;
    for (const auto& p : model_->named_parameters()) out.emplace_back(p.key(), p.value().detach().clone());
    return out;
  }
  void copy_params(const NamedTensors& from) {
    size_t i = 0;
    for (auto& p : model_->named_parameters()) p.value().detach().copy_(from.at(i++).second);
  }
  NamedTensors ema_;
};

// Fail: each batch's augmentation seed from the run's seed and the batch position alone, as a
// worker stream seeded once (never with the epoch) gives: reproducible and distinct within an
// epoch, and the same again every epoch.
class AugmentationRepeatsEachEpoch : public ref::ReferenceRun {
 protected:
  uint64_t augmentation_seed(uint64_t /*epoch_seed*/, int64_t batch) const override {
    return ref::batch_seed(static_cast<uint64_t>(options_.seed), batch);
  }
};

// Fail: the checkpoint as two files, the model and the rest, each written atomically but one after
// the other: a kill between the two leaves the new model beside the old optimizer state.
class TwoFileCheckpoint : public ref::ReferenceRun {
 public:
  void save_checkpoint(const std::string& path) override {
    auto [model, rest] = split();
    ref::save_parts(model, path);
    ref::save_parts(rest, path + ".rest");
  }
  void load_checkpoint(const std::string& path) override {
    auto [model, rest] = split();
    ref::load_parts(model, path, options_.device);
    ref::load_parts(rest, path + ".rest", options_.device);
    loader_.reset();
  }

 private:
  std::pair<std::vector<ref::CheckpointPart>, std::vector<ref::CheckpointPart>> split() {
    std::vector<ref::CheckpointPart> all = checkpoint_parts();
    std::vector<ref::CheckpointPart> model(all.begin(), all.begin() + 1), rest(all.begin() + 1, all.end());
    return {model, rest};
  }
};

// Tabular rows: batches of (B, 12) features from a table of its own (made by make_batch, no
// augmentation), an MLP. data_saturation's extra work must cost on rows as on images, and its
// augmentation probe must not measure the reference's image augmentation instead of the recipe's.
// Declared: the recipe says what its batches are before augmentation and how it augments them (it
// does not: identity).
template <bool Declared>
class TabularRows : public ref::ReferenceRun {
 protected:
  std::shared_ptr<torch::nn::Module> make_model() override {
    return torch::nn::Sequential(torch::nn::Linear(12, 16), torch::nn::ReLU(), torch::nn::Linear(16, 4)).ptr();
  }
  at::Tensor model_forward(const at::Tensor& x) override {
    return std::dynamic_pointer_cast<torch::nn::SequentialImpl>(module_)->forward(x);  // (B, 12) -> (B, 4)
  }
  ref::Batch make_batch(int64_t index) const override {
    const at::Tensor idx = sampler_->batch_indices(index);
    ref::Batch b;
    b.index = index;
    b.images = table().index_select(0, idx);  // (B, 12): no augmentation
    b.labels = data_->labels().index_select(0, idx);            // (B)
    return b;
  }
  at::Tensor augment_batch(const at::Tensor& rows, uint64_t seed) const override {
    return Declared ? rows : ReferenceRun::augment_batch(rows, seed);  // declared: none
  }
  at::Tensor augmentation_probe_input() const override {
    return Declared ? table().narrow(0, 0, 4) : ReferenceRun::augmentation_probe_input();
  }

 private:
  at::Tensor table() const { return data_->images().flatten(1).narrow(1, 0, 12).contiguous(); }  // (N, 12)
};

TEST(WrittenDifferently, TabularRowsInDataSaturation) {
  // Undeclared: the probe's images and the recipe's rows differ in layout: not judged, saying so.
  const Cell undeclared = run_one("data_saturation", "tabular_rows", make<TabularRows<false>>());
  expect_nothing_broken(undeclared, "data_saturation", "tabular_rows");
  EXPECT_EQ(promise_status(undeclared, "worker_augmentations"), "recorded") << undeclared.evidence;
  EXPECT_NE(undeclared.evidence.find("override ReferenceRun::augmentation_probe_input()"), std::string::npos)
      << undeclared.evidence;
  // Declared, no random augmentation: nothing to seed, recorded as such; the waits judged.
  const Cell declared = run_one("data_saturation", "tabular_rows_declared", make<TabularRows<true>>());
  expect_nothing_broken(declared, "data_saturation", "tabular_rows_declared");
  EXPECT_EQ(promise_status(declared, "worker_augmentations"), "recorded") << declared.evidence;
  EXPECT_NE(declared.evidence.find("no random augmentation"), std::string::npos) << declared.evidence;
}

// A loop written by hand that backpropagates the losses its forward_loss() left in losses_ one by
// one (backward_each: the backward of one, with whatever the loop does around it), then unscales,
// clips and steps once: what the accumulation recipes below share.
class OwnMicroBatchLoop : public ref::ReferenceRun {
 protected:
  virtual void backward_each(const at::Tensor& l) { scaler_->scale(l).backward(); }
  void optimisation_step(const at::Tensor&) override {
    optimizer_->zero_grad(/*set_to_none=*/true);
    for (const at::Tensor& l : losses_) backward_each(l);
    losses_.clear();
    after_backward();
    scaler_->unscale_(*optimizer_);
    torch::nn::utils::clip_grad_norm_(step_parameters(), config_.clip_norm);
    scaler_->step(*optimizer_);
    scaler_->update();
  }
  std::vector<at::Tensor> losses_;
};

// Gradient accumulation over uneven micro-batches (16 = 6 + 5 + 5), each micro-batch's loss weighted
// by its share of the batch, so that the summed gradient is the whole batch's; zero_grad once before
// the micro-batches, clipping and the step once after them. ZeroGradInLoop: the classic mistake,
// zero_grad at the top of the micro-batch loop: only the last micro-batch's gradient reaches step().
template <bool ZeroGradInLoop>
class AccumulatedMicroBatches : public OwnMicroBatchLoop {
 protected:
  at::Tensor forward_loss(const at::Tensor& x, const at::Tensor& y) override {
    losses_.clear();
    const int64_t batch = x.size(0);
    at::Tensor reported;
    int64_t at = 0;
    for (const int64_t n : {batch - 2 * (batch / 3), batch / 3, batch / 3}) {
      at::Tensor l = ReferenceRun::forward_loss(x.narrow(0, at, n), y.narrow(0, at, n)) *
                     (static_cast<double>(n) / static_cast<double>(batch));
      losses_.push_back(l);
      reported = reported.defined() ? reported + l.detach() : l.detach();
      at += n;
    }
    return reported;  // the batch's loss: the size-weighted sum of the micro-batches'
  }
  void backward_each(const at::Tensor& l) override {
    if (ZeroGradInLoop) optimizer_->zero_grad(/*set_to_none=*/true);
    scaler_->scale(l).backward();
  }
};

// The same mistakes and a correct loop, written otherwise: the micro-batches cut by x.chunk(3)
// (16 = 6 + 6 + 4, not the check's 6 + 5 + 5), the mean losses summed undivided, or the loss
// backpropagated twice (retain_graph), as loops written by hand do.
enum class ByHand { kChunkedCorrect, kUndivided, kBackwardTwice, kOddSplitCorrect, kOddSplitUndivided };
template <ByHand Kind>
class HandAccumulation : public OwnMicroBatchLoop {
 protected:
  at::Tensor forward_loss(const at::Tensor& x, const at::Tensor& y) override {
    losses_.clear();
    if (Kind == ByHand::kBackwardTwice) {
      losses_.push_back(ReferenceRun::forward_loss(x, y));
      return losses_.back().detach();
    }
    // x.chunk(3), or a split neither tensor_split nor chunk makes (4 + 8 + 4 of 16: the check finds it
    // among every composition of the batch).
    const bool odd = Kind == ByHand::kOddSplitCorrect || Kind == ByHand::kOddSplitUndivided;
    const std::vector<at::Tensor> xs = odd ? x.split_with_sizes({4, 8, x.size(0) - 12}) : x.chunk(3);
    const std::vector<at::Tensor> ys = odd ? y.split_with_sizes({4, 8, y.size(0) - 12}) : y.chunk(3);
    at::Tensor reported;
    for (size_t i = 0; i < xs.size(); ++i) {
      at::Tensor l = ReferenceRun::forward_loss(xs[i], ys[i]);
      if (Kind == ByHand::kChunkedCorrect || Kind == ByHand::kOddSplitCorrect) {
        l = l * (static_cast<double>(xs[i].size(0)) / static_cast<double>(x.size(0)));
      }
      losses_.push_back(l);
      reported = reported.defined() ? reported + l.detach() : l.detach();
    }
    const bool undivided = Kind == ByHand::kUndivided || Kind == ByHand::kOddSplitUndivided;
    return undivided ? reported / 3.0 : reported;  // the log shows the mean either way
  }
  void backward_each(const at::Tensor& l) override {
    if (Kind == ByHand::kBackwardTwice) scaler_->scale(l).backward({}, /*retain_graph=*/true);
    scaler_->scale(l).backward();
  }
};

// zero_grad after the step instead of before the backward (the gradients are cleared for the next
// step all the same): correct.
class ZeroGradAfterStep : public ref::ReferenceRun {
 protected:
  void optimisation_step(const at::Tensor& loss) override {
    backward(loss);
    after_backward();
    scaler_->unscale_(*optimizer_);
    torch::nn::utils::clip_grad_norm_(step_parameters(), config_.clip_norm);
    scaler_->step(*optimizer_);
    scaler_->update();
    optimizer_->zero_grad(/*set_to_none=*/true);
  }
};

// Accumulation through the slot (ReferenceRun::micro_batch_sizes): 16 = 6 + 5 + 5, each weighed by
// its share. ZeroGradInLoop: the slot's backward of a micro-batch clears the gradients first.
template <bool ZeroGradInLoop>
class SlotAccumulation : public ref::ReferenceRun {
 protected:
  std::vector<int64_t> micro_batch_sizes(int64_t batch) const override { return even_split(batch, 3); }
  void backward_micro_batch(const at::Tensor& loss) override {
    if (ZeroGradInLoop) optimizer_->zero_grad(/*set_to_none=*/true);
    ReferenceRun::backward_micro_batch(loss);
  }
};

// Which gradient the step used (issue 40): correct accumulation, by the slot or by hand and split
// otherwise than the check splits, holds batch_gradient; the gradient backpropagated twice or the
// micro-batch losses undivided break it, named; hand-written decoupled decay holds it.
TEST(WrittenDifferently, WhichGradientTheStepUsed) {
  for (const auto& [name, factory] : std::vector<std::pair<std::string, RunFactory>>{
           {"slot_accumulation", make<SlotAccumulation<false>>()},
           {"accumulated_micro_batches", make<AccumulatedMicroBatches<false>>()},
           {"chunked_accumulation", make<HandAccumulation<ByHand::kChunkedCorrect>>()},
           {"decoupled_decay_by_hand", make<DecoupledDecayByHand>()},
           {"frozen_stem", make<FrozenStem>()},
           {"zero_grad_after_step", make<ZeroGradAfterStep>()}}) {
    const Cell c = run_one("step_hygiene", name, factory);
    std::cout << "step_hygiene / " << name << " [" << to_string(c.verdict) << "]: " << c.evidence << "\n";
    expect_nothing_broken(c, "step_hygiene", name);
    EXPECT_EQ(promise_status(c, "batch_gradient"), "held") << c.evidence;
  }
  for (const auto& [name, factory, cause] : std::vector<std::tuple<std::string, RunFactory, std::string>>{
           {"backward_twice", make<HandAccumulation<ByHand::kBackwardTwice>>(),
            "the same loss was backpropagated 2 times"},
           {"undivided_by_hand", make<HandAccumulation<ByHand::kUndivided>>(),
            "each micro-batch's mean loss was backpropagated undivided"}}) {
    const Cell c = run_one("step_hygiene", name, factory);
    std::cout << "step_hygiene / " << name << " [" << to_string(c.verdict) << "]: " << c.evidence << "\n";
    EXPECT_EQ(promise_status(c, "batch_gradient"), "broken") << c.evidence;
    EXPECT_NE(c.evidence.find(cause), std::string::npos) << c.evidence;
    // autograd_inplace does not blame an in-place write for it.
    const Cell a = run_one("autograd_inplace", name, factory);
    EXPECT_NE(a.verdict, Verdict::kFail) << a.evidence;
  }
  // A split of the recipe's own (4 + 8 + 4: neither tensor_split's nor split(m)'s): found among
  // every composition of the batch (16 into 3: 105), so the step's own masks are reproduced and the
  // correct loop holds, the undivided one is caught.
  const Cell odd = run_one("step_hygiene", "odd_split_accumulation", make<HandAccumulation<ByHand::kOddSplitCorrect>>());
  expect_nothing_broken(odd, "step_hygiene", "odd_split_accumulation");
  EXPECT_EQ(promise_status(odd, "batch_gradient"), "held") << odd.evidence;
  EXPECT_TRUE(odd.metrics["batch_gradient"]["same_draws"].get<bool>()) << odd.metrics.dump();
  EXPECT_EQ(odd.metrics["batch_gradient"]["split"], nlohmann::json({4, 8, 4})) << odd.metrics.dump();
  const Cell odd_undivided =
      run_one("step_hygiene", "odd_split_undivided", make<HandAccumulation<ByHand::kOddSplitUndivided>>());
  std::cout << "step_hygiene / odd_split_undivided [" << to_string(odd_undivided.verdict) << "]: "
            << odd_undivided.evidence << "\n";
  EXPECT_EQ(promise_status(odd_undivided, "batch_gradient"), "broken") << odd_undivided.evidence;
  EXPECT_NE(odd_undivided.evidence.find("backpropagated undivided"), std::string::npos) << odd_undivided.evidence;
  const Cell zero = run_one("step_hygiene", "slot_zero_grad_in_loop", make<SlotAccumulation<true>>());
  EXPECT_EQ(promise_status(zero, "fresh_gradients"), "broken") << zero.evidence;
  EXPECT_NE(zero.evidence.find("zero_grad inside the accumulation loop"), std::string::npos) << zero.evidence;
}

// Accumulation through the slot is a loop like any other: every check that applies passes it, and
// the recompution of autograd_inplace, split as the slot splits, is judged (not skipped).
TEST(WrittenDifferently, SlotAccumulationEverywhere) {
  for (const char* check : {"resume_equality", "reproducibility", "eval_mode", "registration", "checkpoint_safety",
                            "data_saturation", "amp"}) {
    expect_nothing_broken(check, "slot_accumulation", make<SlotAccumulation<false>>());
  }
  const Cell a = run_one("autograd_inplace", "slot_accumulation", make<SlotAccumulation<false>>());
  expect_nothing_broken(a, "autograd_inplace", "slot_accumulation");
  EXPECT_EQ(promise_status(a, "gradient_recomputes"), "held") << a.evidence;
}

// The gradient the step used: correct accumulation passes; the update from the last micro-batch
// alone is caught as such (issue 40: before, step_hygiene found the update 1.58e+06x the bound,
// explained by none of its replays, and passed the cell as not judged).
TEST(WrittenDifferently, AccumulatedMicroBatches) {
  const Cell correct = run_one("step_hygiene", "accumulated_micro_batches", make<AccumulatedMicroBatches<false>>());
  expect_nothing_broken(correct, "step_hygiene", "accumulated_micro_batches");
  EXPECT_EQ(promise_status(correct, "fresh_gradients"), "held") << correct.evidence;
  const Cell broken = run_one("step_hygiene", "zero_grad_in_accumulation_loop", make<AccumulatedMicroBatches<true>>());
  std::cout << "step_hygiene / zero_grad_in_accumulation_loop [" << to_string(broken.verdict) << "]: " << broken.evidence << "\n";
  EXPECT_EQ(promise_status(broken, "fresh_gradients"), "broken") << broken.evidence;
  EXPECT_NE(broken.evidence.find("the last one of the step's 3 backward passes alone"), std::string::npos) << broken.evidence;
  EXPECT_NE(broken.evidence.find("zero_grad inside the accumulation loop"), std::string::npos) << broken.evidence;
  for (const char* check : {"resume_equality", "autograd_inplace"}) {
    expect_nothing_broken(check, "accumulated_micro_batches", make<AccumulatedMicroBatches<false>>());
  }
}

TEST(WrittenDifferently, FrozenStem) {
  for (const char* check : {"step_hygiene", "registration", "autograd_inplace", "resume_equality",
                            "checkpoint_safety", "eval_mode", "init"}) {
    expect_nothing_broken(check, "frozen_stem", make<FrozenStem>());
  }
}

TEST(WrittenDifferently, DictStateCheckpoint) {
  for (const char* check : {"checkpoint_safety", "resume_equality", "step_hygiene", "registration"}) {
    expect_nothing_broken(check, "dict_state_checkpoint", make<DictStateCheckpoint>());
  }
}

TEST(WrittenDifferently, FlatKeyCheckpoint) {
  for (const char* check : {"checkpoint_safety", "resume_equality", "registration"}) {
    expect_nothing_broken(check, "flat_key_checkpoint", make<FlatKeyCheckpoint>());
  }
}

TEST(WrittenDifferently, DecoupledDecayByHand) {
  for (const char* check : {"step_hygiene", "resume_equality"}) {
    expect_nothing_broken(check, "decoupled_decay_by_hand", make<DecoupledDecayByHand>());
  }
}

TEST(WrittenDifferently, DeviceFlip) {
  for (const char* check : {"autograd_inplace", "step_hygiene", "resume_equality"}) {
    expect_nothing_broken(check, "device_flip", make<DeviceFlip>());
  }
}

TEST(WrittenDifferently, EmaSavedInTheCheckpoint) {
  expect_nothing_broken("resume_equality", "ema_saved", make<EmaEvaluation<true>>());
}

TEST(WrittenDifferently, ThreeShallowWorkers) {
  expect_nothing_broken("data_saturation", "three_shallow_workers", make<ThreeShallowWorkers>());
  expect_nothing_broken("reproducibility", "three_shallow_workers", make<ThreeShallowWorkers>());
}

TEST(WrittenDifferently, OwnSeedHash) {
  expect_nothing_broken("data_saturation", "own_seed_hash", make<OwnSeedHash>());
}

TEST(WrittenDifferently, FlattenedByReshapeOrContiguousView) {
  expect_nothing_broken("shapes", "flatten_by_reshape", make<FlattenOtherwise<true>>());
  expect_nothing_broken("shapes", "flatten_by_contiguous_view", make<FlattenOtherwise<false>>());
  expect_nothing_broken("device_agnostic", "flatten_by_reshape", make<FlattenOtherwise<true>>());
}

TEST(WrittenDifferently, SmoothedTargetsOnDevice) {
  for (const char* check : {"device_agnostic", "shapes", "autograd_inplace", "step_hygiene"}) {
    expect_nothing_broken(check, "smoothed_targets_on_device", make<SmoothedTargetsOnDevice>());
  }
}

TEST(WrittenDifferently, FrozenStemAndDictCheckpointOnTheOtherChecks) {
  for (const char* check : {"device_agnostic", "shapes", "reproducibility", "grad_checkpointing"}) {
    expect_nothing_broken(check, "frozen_stem", make<FrozenStem>());
    expect_nothing_broken(check, "dict_state_checkpoint", make<DictStateCheckpoint>());
  }
}

// A model of the recipe's own (make_model) with no checkpointed segment: grad_checkpointing has
// nothing to compare and skips it, naming the precondition, instead of failing it for "0 saved".
TEST(Preconditions, AModelThatDoesNoActivationCheckpointingIsSkippedNotFailed) {
  const Cell c = run_one("grad_checkpointing", "own_mlp_without_checkpointing", make<testing_recipes::FlatMlp<32>>());
  EXPECT_EQ(c.verdict, Verdict::kSkipped) << c.evidence;
  EXPECT_NE(c.evidence.find("does no activation checkpointing"), std::string::npos) << c.evidence;
}

TEST(BlindSpots, AnAugmentationThatRepeatsEveryEpochIsCaught) {
  const Cell c = run_one("data_saturation", "augmentation_repeats_each_epoch", make<AugmentationRepeatsEachEpoch>());
  std::cout << c.evidence << "\n";
  EXPECT_EQ(promise_status(c, "worker_augmentations"), "broken") << c.evidence;
  EXPECT_NE(c.evidence.find("epoch 1 got epoch 0's augmentation"), std::string::npos) << c.evidence;
}

TEST(BlindSpots, ACheckpointInTwoFilesTornByAKillIsCaught) {
  const Cell c = run_one("checkpoint_safety", "two_file_checkpoint", make<TwoFileCheckpoint>());
  std::cout << c.evidence << "\n";
  EXPECT_EQ(promise_status(c, "atomic_save"), "broken") << c.evidence;
  EXPECT_NE(c.evidence.find("a state no save wrote whole"), std::string::npos) << c.evidence;
  EXPECT_EQ(promise_status(c, "strict_bare_load"), "held") << c.evidence;
}

TEST(BlindSpots, AnEmaLostOnResumeIsCaught) {
  const Cell c = run_one("resume_equality", "ema_not_saved", make<EmaEvaluation<false>>());
  std::cout << c.evidence << "\n";
  EXPECT_EQ(c.outcome, Outcome::kFail) << c.evidence;
  EXPECT_EQ(promise_status(c, "resume_bitwise"), "held") << c.evidence;
  EXPECT_EQ(promise_status(c, "resume_evaluation"), "broken") << c.evidence;
}

TEST(BlindSpots, ALearnableTensorOutsideTheModuleTreeIsCaught) {
  const Cell c = run_one("registration", "unregistered_temperature", make<UnregisteredTemperature>());
  std::cout << c.evidence << "\n";
  EXPECT_EQ(c.outcome, Outcome::kFail) << c.evidence;
  EXPECT_EQ(promise_status(c, "parameters_registered"), "broken") << c.evidence;
}

}  // namespace
}  // namespace tc

// --- the loop slots of issue 40 (reference/reference_run.h, reference/schedule.h) -----------------
namespace tc {
namespace {

// No weight decay on biases and normalisation parameters, chosen by name (make_optimizer_for).
class NamedNoDecayGroup : public ref::ReferenceRun {
 protected:
  std::unique_ptr<torch::optim::Optimizer> make_optimizer_for(const NamedTensors& named) override {
    std::vector<at::Tensor> decay, no_decay;
    for (const auto& [name, p] : named) {
      const bool is_bias = name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0;
      (is_bias || name.rfind("features.1.", 0) == 0 ? no_decay : decay).push_back(p);  // features.1: BatchNorm
    }
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decay, std::make_unique<torch::optim::SGDOptions>(
                                   torch::optim::SGDOptions(config_.lr).momentum(config_.momentum).weight_decay(config_.weight_decay)));
    groups.emplace_back(no_decay, std::make_unique<torch::optim::SGDOptions>(
                                      torch::optim::SGDOptions(config_.lr).momentum(config_.momentum).weight_decay(0.0)));
    return std::make_unique<torch::optim::SGD>(std::move(groups), torch::optim::SGDOptions(config_.lr));
  }
};

// LibTorch's default initialisation described (libtorch_default_init), a constant learning rate
// (ConstantLR): an MLP on the flattened images.
class DefaultInitConstantLr : public ref::ReferenceRun {
 protected:
  std::shared_ptr<torch::nn::Module> make_model() override {
    namespace nn = torch::nn;
    const int64_t s = config_.data.image_size;
    return nn::Sequential(nn::Flatten(), nn::Linear(3 * s * s, 32), nn::LayerNorm(nn::LayerNormOptions({32})), nn::ReLU(),
                          nn::Linear(32, config_.data.classes))
        .ptr();
  }
  at::Tensor model_forward(const at::Tensor& x) override {
    return std::dynamic_pointer_cast<torch::nn::SequentialImpl>(module_)->forward(x);
  }
  std::vector<InitSpec> declared_init() const override { return ref::libtorch_default_init(*module_); }
  std::unique_ptr<ref::Schedule> make_schedule(torch::optim::Optimizer&) override {
    return std::make_unique<ref::ConstantLR>();
  }
};

// A model of the recipe's own type (a TORCH_MODULE holder with two named members), built by the
// const new_model() slot and read typed through model_as<T>() (wall 2: 0.4's make_model() was also
// what bare_model() called, so a typed model kept in a member was silently replaced).
struct TwoLayerNetImpl : torch::nn::Module {
  TwoLayerNetImpl(int64_t in, int64_t classes)
      : hidden(register_module("hidden", torch::nn::Linear(in, 24))),
        head(register_module("head", torch::nn::Linear(24, classes))) {}
  at::Tensor forward(const at::Tensor& x) { return head(torch::relu(hidden(x.flatten(1)))); }
  torch::nn::Linear hidden, head;
};
TORCH_MODULE(TwoLayerNet);

class TypedOwnModel : public ref::ReferenceRun {
 protected:
  std::shared_ptr<torch::nn::Module> new_model() const override {
    const int64_t s = config_.data.image_size;
    return TwoLayerNet(3 * s * s, config_.data.classes).ptr();
  }
  at::Tensor model_forward(const at::Tensor& x) override { return model_as<TwoLayerNetImpl>().forward(x); }
  std::vector<InitSpec> declared_init() const override { return ref::libtorch_default_init(*module_); }
};

// StepLR stepped once an epoch (PerEpoch): the rate halves at each epoch boundary, and a resume
// mid-epoch steps it at the same update.
class PerEpochStepLr : public ref::ReferenceRun {
 protected:
  std::unique_ptr<ref::Schedule> make_schedule(torch::optim::Optimizer& o) override {
    return std::make_unique<ref::PerEpoch<ref::Resumable<torch::optim::StepLR>>>(steps_per_epoch(), o, 1, 0.5);
  }
};

// A timm-style EMA of the weights (decay 0.9) updated after every step (after_step), evaluated in
// place of the live weights, kept in the checkpoint. Saved = false: the EMA is left out of the
// checkpoint, the mistake resume_equality must catch (the resumed EMA starts again from the weights).
template <bool Saved>
class EmaAfterStep : public ref::ReferenceRun {
 public:
  void setup(const RunOptions& options) override {
    ReferenceRun::setup(options);
    torch::NoGradGuard no_grad;
    ema_.clear();
    for (const auto& [name, p] : parameters()) ema_.push_back(p.detach().clone());
  }
  EvalResult evaluate() override {
    torch::NoGradGuard no_grad;
    const NamedTensors live = parameters();
    std::vector<at::Tensor> kept;
    for (size_t i = 0; i < live.size(); ++i) {
      kept.push_back(live[i].second.detach().clone());
      live[i].second.copy_(ema_[i]);
    }
    EvalResult e = ReferenceRun::evaluate();
    for (size_t i = 0; i < live.size(); ++i) live[i].second.copy_(kept[i]);
    return e;
  }

 protected:
  void after_step() override {
    torch::NoGradGuard no_grad;
    const NamedTensors live = parameters();
    for (size_t i = 0; i < live.size(); ++i) ema_[i].mul_(0.9).add_(live[i].second.detach(), 0.1);
  }
  std::vector<ref::CheckpointPart> checkpoint_parts() override {
    std::vector<ref::CheckpointPart> parts = ReferenceRun::checkpoint_parts();
    if (Saved) {
      parts.push_back({"ema",
                       [this](torch::serialize::OutputArchive& a) {
                         for (size_t i = 0; i < ema_.size(); ++i) a.write("ema." + std::to_string(i), ema_[i]);
                       },
                       [this](torch::serialize::InputArchive& a) {
                         for (size_t i = 0; i < ema_.size(); ++i) a.read("ema." + std::to_string(i), ema_[i]);
                       }});
    }
    return parts;
  }

 private:
  std::vector<at::Tensor> ema_;
};

// Class-balanced batches from the labels make_sampler_for() is given: each epoch shuffles every
// class's samples (the loader's generator) and deals them out class by class in turn, so that every
// batch holds the classes in equal share. Its state: the epoch, its order and its augmentation seed.
class ClassBalancedSampler : public testing_recipes::DrawnOrderSampler {
 public:
  ClassBalancedSampler(const at::Tensor& labels, int64_t batch, at::Generator g)
      : DrawnOrderSampler(labels.size(0), batch, std::move(g)), labels_(labels.cpu()) {}

 protected:
  at::Tensor draw(at::Generator& g) override {
    const int64_t classes = labels_.max().item<int64_t>() + 1;
    std::vector<at::Tensor> per_class;
    int64_t shortest = labels_.size(0);
    for (int64_t c = 0; c < classes; ++c) {
      const at::Tensor idx = (labels_ == c).nonzero().flatten();  // (n_c)
      per_class.push_back(idx.index_select(0, torch::randperm(idx.size(0), g, torch::kLong)));
      shortest = std::min(shortest, idx.size(0));
    }
    for (at::Tensor& t : per_class) t = t.narrow(0, 0, shortest);
    return torch::stack(per_class, 1).flatten();  // (classes * shortest): c0, c1, ..., c0, c1, ...
  }

 private:
  at::Tensor labels_;
};

class ClassBalanced : public ref::ReferenceRun {
 public:
  // The labels of batch b of the current epoch (what the test counts).
  at::Tensor batch_labels(int64_t b) const { return data_->labels().index_select(0, sampler_->batch_indices(b)); }

 protected:
  std::unique_ptr<ref::Sampler> make_sampler_for(int64_t, at::Generator g, const at::Tensor& labels) override {
    return std::make_unique<ClassBalancedSampler>(labels, config_.batch_size, std::move(g));
  }
};
using ClassBalancedNoPosition = variants::Without<variants::kSampler, ClassBalanced>;

TEST(LoopSlots, ClassBalancedSamplerPassesAndItsPositionIsChecked) {
  ClassBalanced probe;
  RunOptions o;
  o.seed = 5;
  probe.setup(o);
  probe.train_step();  // the first epoch's order drawn
  const at::Tensor counts = torch::bincount(probe.batch_labels(0));
  EXPECT_EQ(counts.min().item<int64_t>(), counts.max().item<int64_t>()) << counts;  // every class in equal share
  for (const char* check : {"resume_equality", "reproducibility", "step_hygiene"}) {
    expect_nothing_broken(check, "class_balanced", make<ClassBalanced>());
  }
  const Cell lost = run_one("resume_equality", "class_balanced_no_position", make<ClassBalancedNoPosition>());
  EXPECT_EQ(lost.outcome, Outcome::kFail) << lost.evidence;
  EXPECT_EQ(promise_status(lost, "resume_bitwise"), "broken") << lost.evidence;
}

TEST(LoopSlots, PerEpochStepsTheInnerScheduleOnceAnEpoch) {
  at::Tensor w = torch::zeros({1}, torch::requires_grad());
  torch::optim::SGD sgd({w}, torch::optim::SGDOptions(1.0));
  ref::PerEpoch<ref::Resumable<torch::optim::StepLR>> s(3, sgd, 1, 0.5);
  std::vector<int64_t> inner_steps;
  for (int i = 0; i < 7; ++i) {
    s.step();
    inner_steps.push_back(s.inner().step_count());
  }
  // Stepped after updates 3 and 6, the ends of the epochs (what StepLR then does with its count is
  // LibTorch's: it decays one step later than Python's, docs/python.md).
  EXPECT_EQ(inner_steps, (std::vector<int64_t>{0, 0, 1, 1, 1, 2, 2}));
}

// Label smoothing (0.1) as the custom loss, in the one slot (loss_of).
class LabelSmoothing : public ref::ReferenceRun {
 protected:
  at::Tensor loss_of(const at::Tensor& output, const at::Tensor& target) override {
    return torch::nn::functional::cross_entropy(output, target,
                                                torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(0.1));
  }
};

TEST(LoopSlots, ACustomLossInItsSlotPassesEveryCheckThatRecomputesIt) {
  for (const char* check : {"step_hygiene", "autograd_inplace", "resume_equality", "amp"}) {
    expect_nothing_broken(check, "label_smoothing", make<LabelSmoothing>());
  }
}

TEST(LoopSlots, NamedNoDecayGroupPasses) {
  for (const char* check : {"step_hygiene", "resume_equality", "registration"}) {
    expect_nothing_broken(check, "named_no_decay_group", make<NamedNoDecayGroup>());
  }
}

TEST(LoopSlots, DefaultInitDescribedAndConstantLrPass) {
  const Cell init = run_one("init", "default_init_constant_lr", make<DefaultInitConstantLr>());
  expect_nothing_broken(init, "init", "default_init_constant_lr");
  EXPECT_EQ(init.verdict, Verdict::kOk) << init.evidence;
  EXPECT_EQ(init.outcome, Outcome::kPass) << init.evidence;
  for (const char* check : {"step_hygiene", "resume_equality"}) {
    expect_nothing_broken(check, "default_init_constant_lr", make<DefaultInitConstantLr>());
  }
}

TEST(LoopSlots, TypedModelOfNewModelPassesWhereTheBareModelIsBuilt) {
  // checkpoint_safety and registration load the checkpoint into bare_model(); resume_equality and
  // step_hygiene train on; init reads the declared (LibTorch default) initialisation.
  for (const char* check : {"checkpoint_safety", "registration", "resume_equality", "step_hygiene", "init"}) {
    expect_nothing_broken(check, "typed_own_model", make<TypedOwnModel>());
  }
}

TEST(LoopSlots, PerEpochScheduleResumesMidEpoch) {
  for (const char* check : {"resume_equality", "step_hygiene"}) {
    expect_nothing_broken(check, "per_epoch_step_lr", make<PerEpochStepLr>());
  }
}

TEST(LoopSlots, EmaAfterStepPassesAndAnEmaLeftOutOfTheCheckpointIsCaught) {
  for (const char* check : {"resume_equality", "step_hygiene", "eval_mode"}) {
    expect_nothing_broken(check, "ema_after_step", make<EmaAfterStep<true>>());
  }
  const Cell lost = run_one("resume_equality", "ema_not_saved", make<EmaAfterStep<false>>());
  std::cout << "resume_equality / ema_not_saved [" << to_string(lost.verdict) << "]: " << lost.evidence << "\n";
  EXPECT_EQ(lost.outcome, Outcome::kFail) << lost.evidence;
  EXPECT_EQ(promise_status(lost, "resume_evaluation"), "broken") << lost.evidence;
}

}  // namespace
}  // namespace tc
