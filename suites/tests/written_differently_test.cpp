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
#include "suites/tests/test_recipes.h"

namespace tc {
namespace {

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

template <typename T>
RunFactory make() {
  return [] { return std::unique_ptr<Run>(new T()); };
}

// Every promise the cell judged held (or was recorded as not judged, with its reason).
void expect_nothing_broken(const std::string& check, const std::string& recipe, RunFactory f) {
  const Cell c = run_one(check, recipe, std::move(f));
  std::cout << check << " / " << recipe << " [" << to_string(c.verdict) << "]: " << c.evidence << "\n";
  EXPECT_EQ(c.outcome, Outcome::kPass) << check << " / " << recipe << ": " << c.evidence;
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
