#include "suites/generated/generated_run.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <random>
#include <stdexcept>

#include <torch/torch.h>

#include "reference/reference_run.h"

namespace tc::generated {

const std::array<Dimension, kDims>& dimensions() {
  static const std::array<Dimension, kDims> dims{{
      {"optimizer", {"sgd", "sgd_nesterov", "adam", "adamw", "rmsprop"}},
      {"schedule", {"step_lr", "constant", "warmup_cosine", "step_lr_per_epoch"}},
      {"batching", {"16_drop_last", "20_uneven_last", "8_drop_last"}},
      {"accumulation", {"1", "2", "3"}},
      {"model", {"classifier", "classifier_frozen_bn", "mlp"}},
      {"freezing", {"none", "first_layer"}},
      {"ema", {"none", "evaluated", "kept"}},
      {"checkpoint", {"archive", "state_dict_entry", "flat_keys"}},
      {"loss", {"cross_entropy", "label_smoothing"}},
      {"decay", {"all", "no_decay_1d"}},
      {"augmentation", {"workers", "flip_on_device", "none"}},
  }};
  return dims;
}

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::string none(const Draw&) { return ""; }

}  // namespace

Draw draw(uint64_t seed) {
  Draw d;
  d.seed = seed;
  uint64_t state = seed;
  for (int i = 0; i < kDims; ++i) {
    d.pick[static_cast<size_t>(i)] =
        static_cast<int>(splitmix64(state) % dimensions()[static_cast<size_t>(i)].choices.size());
  }
  return d;
}

std::string Draw::describe() const {
  std::string s;
  for (int i = 0; i < kDims; ++i) {
    if (!s.empty()) s += ' ';
    s.append(dimensions()[static_cast<size_t>(i)].name).append("=").append(choice(static_cast<Dim>(i)));
  }
  return s;
}

const std::vector<Operator>& operators() {
  static const std::vector<Operator> ops{
      {"drop_zero_grad", "optimizer.zero_grad() left out: each step adds its gradient to the last one's",
       "step_hygiene", {"fresh_gradients"}, none},
      {"zero_grad_in_micro_loop", "zero_grad() at the top of the micro-batch loop: only the last micro-batch's gradient is stepped",
       "step_hygiene", {"fresh_gradients", "batch_gradient"},
       [](const Draw& d) -> std::string { return d.is(kAccumulation, "1") ? "one micro-batch per step: nothing to clear between" : ""; }},
      {"undivided_accumulation", "each micro-batch's mean loss backpropagated undivided (not weighed by its share)",
       "step_hygiene", {"batch_gradient"},
       [](const Draw& d) -> std::string { return d.is(kAccumulation, "1") ? "one micro-batch per step: its share is the whole batch" : ""; }},
      {"clip_after_step", "clip_grad_norm_ after optimizer.step(): the step used the unclipped gradient",
       "step_hygiene", {"clip_between_backward_and_step"}, none},
      {"clip_subset", "clip_grad_norm_ given the head's parameters only (the last layer): the layers before it step with their gradient unclipped",
       "step_hygiene", {"clip_between_backward_and_step"},
       [](const Draw& d) -> std::string {
         return d.is(kModel, "mlp") && d.is(kFreezing, "first_layer")
                    ? "the MLP with its first layer frozen: the head is every parameter that takes a gradient"
                    : "";
       }},
      {"rebuild_optimizer_each_epoch", "the optimizer and its schedule built inside the epoch loop: every epoch after the "
       "first starts from a fresh optimizer (momentum, moments lost) and a schedule started over",
       "step_hygiene", {"optimizer_built_once"}, none},
      {"skip_set_epoch", "sampler.set_epoch(epoch) called for the first epoch only: every epoch repeats the first's "
       "order (and the augmentation seeds the sampler draws with it)",
       "data_saturation", {"epoch_order", "worker_augmentations"}, none},
      {"no_optimizer_state", "the optimizer's state (momentum, moments) left out of the checkpoint", "resume_equality",
       {"resume_bitwise"}, none},
      {"no_scheduler_state", "the schedule's state left out of the checkpoint", "resume_equality", {"resume_bitwise"},
       [](const Draw& d) -> std::string {
         return d.is(kSchedule, "constant") ? "a constant rate: the schedule's state (a step count) sets no rate" : "";
       }},
      {"no_rng_state", "the generators' states (torch's, the loader's) left out of the checkpoint", "resume_equality",
       {"resume_bitwise"}, none},
      {"no_sampler_state", "the sampler's position and epoch order left out of the checkpoint", "resume_equality",
       {"resume_bitwise"}, none},
      {"no_ema_state", "the EMA of the weights left out of the checkpoint", "resume_equality",
       {"resume_bitwise", "resume_evaluation"},
       [](const Draw& d) -> std::string {
         if (d.is(kEma, "none")) return "no EMA";
         if (d.is(kEma, "kept")) return "the EMA is kept but nothing reads it (not evaluated, not a parameter or buffer)";
         return "";
       }},
      {"no_scaler_state", "the GradScaler's state (scale, growth tracker) left out of the checkpoint: with fp16 the resumed run starts over at the initial scale",
       "resume_equality", {"resume_bitwise_amp"}, none},
      {"lenient_load", "the checkpoint loaded into the model wrapped for data parallelism with strict=False: no key matches "
       "('module.' prefixed), nothing loads and nothing says so; the resume goes on from the fresh initialisation",
       "resume_equality", {"resume_bitwise"}, none},
      {"eval_without_eval", "evaluation without model.eval(): dropout drops and BatchNorm updates its statistics",
       "eval_mode", {"eval_bitwise", "bn_stats_untouched"},
       [](const Draw& d) -> std::string {
         return d.is(kModel, "mlp") ? "the MLP has no dropout or BatchNorm: train() and eval() compute alike" : "";
       }},
      {"eval_without_no_grad", "evaluation without NoGradGuard: it builds an autograd graph", "eval_mode",
       {"no_autograd_graph"}, none},
      {"no_train_after_eval", "the epoch starts without model.train(): training goes on in eval mode after an evaluation",
       "eval_mode", {"train_mode_restored"}, none},
      {"non_atomic_save", "the checkpoint written straight over the previous file (no temporary file and rename)",
       "checkpoint_safety", {"atomic_save"}, none},
      {"prefixed_save", "the model saved through a wrapper: every key prefixed with 'module.'", "checkpoint_safety",
       {"strict_bare_load"}, none},
      {"no_seed", "seed_everything() left out: nothing is seeded", "reproducibility",
       {"same_seed_bitwise", "other_process_bitwise"}, none},
      {"unseeded_augmentation", "the workers' augmentation draws from an engine nobody seeded (std::random_device)",
       "reproducibility", {"same_seed_bitwise", "other_process_bitwise"},
       [](const Draw& d) -> std::string {
         return d.is(kAugmentation, "workers") ? "" : "no augmentation on the loader's workers: nothing reads their seed";
       }},
  };
  return ops;
}

const Operator* find_operator(const std::string& name) {
  for (const Operator& op : operators()) {
    if (name == op.name) return &op;
  }
  return nullptr;
}

std::vector<const Operator*> applicable(const Draw& d) {
  std::vector<const Operator*> out;
  for (const Operator& op : operators()) {
    if (op.equivalent_on(d).empty()) out.push_back(&op);
  }
  return out;
}

namespace {

// The digits at `pos` as a seed; advances pos. nullopt when there are none.
std::optional<uint64_t> read_seed(const std::string& s, size_t& pos) {
  const size_t start = pos;
  while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) ++pos;
  if (pos == start || pos - start > 19) return std::nullopt;
  return std::stoull(s.substr(start, pos - start));
}

std::string operator_names() {
  std::string known;
  for (const Operator& o : operators()) known += std::string(known.empty() ? "" : ", ") + o.name;
  return known;
}

}  // namespace

std::vector<RecipeInfo> recipes_named(const std::string& name) {
  if (name.rfind("gen-", 0) != 0) return {};
  size_t pos = 4;
  const std::optional<uint64_t> first = read_seed(name, pos);
  if (!first) return {};
  uint64_t last = *first;
  if (name.compare(pos, 2, "..") == 0) {
    pos += 2;
    const std::optional<uint64_t> to = read_seed(name, pos);
    if (!to || *to < *first || *to - *first >= 100000) {
      throw std::invalid_argument("'" + name + "': a range of draws is gen-A..B with A <= B, at most 100000 draws");
    }
    last = *to;
  }
  std::string tail;
  if (pos < name.size()) {
    if (name[pos] != '-') return {};
    tail = name.substr(pos + 1);
  }
  std::vector<RecipeInfo> out;
  const bool one = *first == last;
  for (uint64_t seed = *first;; ++seed) {
    const Draw d = draw(seed);
    if (tail.empty()) {
      out.push_back(recipe_info(seed));
    } else if (tail == "*" || tail[0] == '@') {
      for (const Operator* op : applicable(d)) {
        if (tail == "*" || tail.substr(1) == op->check) out.push_back(recipe_info(seed, op));
      }
    } else {
      const Operator* op = find_operator(tail);
      if (op == nullptr) {
        throw std::invalid_argument("'" + name + "': no mutation operator '" + tail + "' (operators: " + operator_names() + ")");
      }
      const std::string why = op->equivalent_on(d);
      if (why.empty()) {
        out.push_back(recipe_info(seed, op));
      } else if (one) {
        throw std::invalid_argument("'" + name + "' is equivalent to its draw by construction (" + why +
                                    "): `list --recipe " + name_of(seed) + "` names the mutants that apply");
      }
    }
    if (seed == last) break;
  }
  return out;
}

std::string name_of(uint64_t seed, const Operator* op) {
  return "gen-" + std::to_string(seed) + (op ? std::string("-") + op->name : std::string());
}

namespace {

bool is(const Operator* op, const char* name) { return op != nullptr && std::string(op->name) == name; }

ref::TrainConfig config_for(const Draw& d) {
  ref::TrainConfig c;
  if (d.is(kBatching, "20_uneven_last")) {
    c.batch_size = 20;  // 96 = 4 x 20 + 16
    c.drop_last = false;
  } else if (d.is(kBatching, "8_drop_last")) {
    c.batch_size = 8;
  }
  // Adaptive optimizers at rates their users pick (PyTorch's defaults: Adam 1e-3; RMSprop 1e-2
  // without momentum, here 1e-3: with the reference's 0.05 and momentum 0.9, an RMSprop draw drove
  // the MLP's loss to exactly 0 within 16 steps, a run with nothing left to judge).
  if (d.is(kOptimizer, "adam") || d.is(kOptimizer, "adamw")) c.lr = 2e-3;
  if (d.is(kOptimizer, "rmsprop")) c.lr = 1e-3;
  if (d.is(kOptimizer, "adamw")) c.weight_decay = 0.01;
  return c;
}

// A module holding another under the name "module", as DDP does: its keys are prefixed.
struct Wrapper : torch::nn::Module {
  explicit Wrapper(std::shared_ptr<torch::nn::Module> inner) { register_module("module", std::move(inner)); }
};

// The recipe a draw names, with at most one mistake (op) applied.
class GeneratedRun : public ref::ReferenceRun {
 public:
  GeneratedRun(const Draw& d, const Operator* op) : ReferenceRun(config_for(d)), d_(d), op_(op) {}

  void setup(const RunOptions& options) override {
    ReferenceRun::setup(options);
    torch::NoGradGuard no_grad;
    ema_.clear();
    if (!d_.is(kEma, "none")) {
      for (const auto& [name, p] : parameters()) ema_.push_back(p.detach().clone());
    }
  }

  EvalResult evaluate() override {
    std::optional<torch::NoGradGuard> no_grad;
    if (!is(op_, "eval_without_no_grad")) no_grad.emplace();
    if (!is(op_, "eval_without_eval")) module_->eval();
    if (!d_.is(kEma, "evaluated")) return eval_loop();
    const NamedTensors live = parameters();
    std::vector<at::Tensor> kept;
    {
      torch::NoGradGuard swap;
      for (size_t i = 0; i < live.size(); ++i) {
        kept.push_back(live[i].second.detach().clone());
        live[i].second.copy_(ema_[i]);
      }
    }
    EvalResult e = eval_loop();
    torch::NoGradGuard swap;
    for (size_t i = 0; i < live.size(); ++i) live[i].second.copy_(kept[i]);
    return e;
  }

  void save_checkpoint(const std::string& path) override {
    if (!is(op_, "non_atomic_save")) return ReferenceRun::save_checkpoint(path);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    const std::string bytes = ref::checkpoint_bytes(checkpoint_parts());
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

  std::vector<InitSpec> declared_init() const override {
    if (d_.is(kModel, "mlp")) return ref::libtorch_default_init(*module_);
    return ReferenceRun::declared_init();
  }

 protected:
  void seed_everything() override {
    if (!is(op_, "no_seed")) ReferenceRun::seed_everything();
  }

  std::shared_ptr<torch::nn::Module> new_model() const override {
    std::shared_ptr<torch::nn::Module> m;
    if (d_.is(kModel, "mlp")) {
      namespace nn = torch::nn;
      const int64_t s = config_.data.image_size;
      m = nn::Sequential(nn::Flatten(), nn::Linear(3 * s * s, 32), nn::ReLU(), nn::Linear(32, config_.data.classes)).ptr();
    } else {
      m = ReferenceRun::new_model();
    }
    if (d_.is(kFreezing, "first_layer")) {
      // The first layer's parameters ("features.0." of the classifier, "1." of the MLP).
      const auto named = m->named_parameters();
      const std::string first = named.begin()->key();
      const std::string prefix = first.substr(0, first.rfind('.') + 1);
      for (auto& p : named) {
        if (p.key().rfind(prefix, 0) == 0) p.value().requires_grad_(false);
      }
    }
    return m;
  }

  at::Tensor model_forward(const at::Tensor& x) override {
    if (d_.is(kModel, "mlp")) return model_as<torch::nn::SequentialImpl>().forward(x);
    // BatchNorm frozen at every training forward, not once an epoch: a model rebuilt and loaded
    // mid-epoch (a resume) starts in train mode without a begin_epoch().
    if (d_.is(kModel, "classifier_frozen_bn") && module_->is_training()) freeze_batch_norm();
    return ReferenceRun::model_forward(x);
  }

  void freeze_batch_norm() {
    for (auto& m : module_->modules(/*include_self=*/false)) {
      if (dynamic_cast<torch::nn::BatchNorm2dImpl*>(m.get()) != nullptr) m->eval();
    }
  }

  std::unique_ptr<torch::optim::Optimizer> make_optimizer_for(const NamedTensors& named) override {
    namespace optim = torch::optim;
    std::vector<at::Tensor> decay, no_decay;
    for (const auto& [name, p] : named) (d_.is(kDecay, "no_decay_1d") && p.dim() <= 1 ? no_decay : decay).push_back(p);
    const double lr = config_.lr, wd = config_.weight_decay;
    auto options = [&](double w) -> std::unique_ptr<optim::OptimizerOptions> {
      if (d_.is(kOptimizer, "sgd")) return std::make_unique<optim::SGDOptions>(optim::SGDOptions(lr).momentum(0.9).weight_decay(w));
      if (d_.is(kOptimizer, "sgd_nesterov")) {
        return std::make_unique<optim::SGDOptions>(optim::SGDOptions(lr).momentum(0.9).nesterov(true).weight_decay(w));
      }
      if (d_.is(kOptimizer, "adam")) return std::make_unique<optim::AdamOptions>(optim::AdamOptions(lr).weight_decay(w));
      if (d_.is(kOptimizer, "adamw")) return std::make_unique<optim::AdamWOptions>(optim::AdamWOptions(lr).weight_decay(w));
      return std::make_unique<optim::RMSpropOptions>(optim::RMSpropOptions(lr).weight_decay(w));
    };
    std::vector<optim::OptimizerParamGroup> groups;
    if (!decay.empty()) groups.emplace_back(decay, options(wd));
    if (!no_decay.empty()) groups.emplace_back(no_decay, options(0.0));
    if (d_.is(kOptimizer, "sgd") || d_.is(kOptimizer, "sgd_nesterov")) {
      return std::make_unique<optim::SGD>(std::move(groups), optim::SGDOptions(lr).momentum(0.9));
    }
    if (d_.is(kOptimizer, "adam")) return std::make_unique<optim::Adam>(std::move(groups), optim::AdamOptions(lr));
    if (d_.is(kOptimizer, "adamw")) return std::make_unique<optim::AdamW>(std::move(groups), optim::AdamWOptions(lr));
    return std::make_unique<optim::RMSprop>(std::move(groups), optim::RMSpropOptions(lr));
  }

  std::unique_ptr<ref::Schedule> make_schedule(torch::optim::Optimizer& o) override {
    if (d_.is(kSchedule, "constant")) return std::make_unique<ref::ConstantLR>();
    if (d_.is(kSchedule, "warmup_cosine")) return std::make_unique<ref::WarmupCosine>(o, 3, 4 * steps_per_epoch(), 0.1);
    if (d_.is(kSchedule, "step_lr_per_epoch")) {
      return std::make_unique<ref::PerEpoch<ref::Resumable<torch::optim::StepLR>>>(steps_per_epoch(), o, 1, 0.5);
    }
    return ReferenceRun::make_schedule(o);
  }

  std::vector<int64_t> micro_batch_sizes(int64_t batch) const override {
    const int64_t k = std::stoll(d_.choice(kAccumulation));
    return even_split(batch, std::min(k, batch));
  }

  at::Tensor weigh_micro_batch(const at::Tensor& loss, int64_t n, int64_t batch) override {
    if (is(op_, "undivided_accumulation")) return loss;
    return ReferenceRun::weigh_micro_batch(loss, n, batch);
  }

  void backward_micro_batch(const at::Tensor& loss) override {
    if (is(op_, "zero_grad_in_micro_loop")) optimizer_->zero_grad(/*set_to_none=*/true);
    ReferenceRun::backward_micro_batch(loss);
  }

  void optimisation_step(const at::Tensor& loss) override {
    if (!is(op_, "drop_zero_grad") && !is(op_, "clip_after_step") && !is(op_, "clip_subset")) {
      return ReferenceRun::optimisation_step(loss);
    }
    if (!is(op_, "drop_zero_grad")) optimizer_->zero_grad(/*set_to_none=*/true);
    backward(loss);
    after_backward();
    scaler_->unscale_(*optimizer_);
    if (is(op_, "drop_zero_grad")) torch::nn::utils::clip_grad_norm_(step_parameters(), config_.clip_norm);
    if (is(op_, "clip_subset")) torch::nn::utils::clip_grad_norm_(head_parameters(), config_.clip_norm);
    scaler_->step(*optimizer_);
    if (is(op_, "clip_after_step")) torch::nn::utils::clip_grad_norm_(step_parameters(), config_.clip_norm);
    scaler_->update();
  }

  at::Tensor loss_of(const at::Tensor& output, const at::Tensor& target) override {
    if (!d_.is(kLoss, "label_smoothing")) return ReferenceRun::loss_of(output, target);
    namespace F = torch::nn::functional;
    return F::cross_entropy(output, target, F::CrossEntropyFuncOptions().label_smoothing(0.1));
  }

  void after_step() override {
    if (ema_.empty()) return;
    torch::NoGradGuard no_grad;
    const NamedTensors live = parameters();
    for (size_t i = 0; i < live.size(); ++i) ema_[i].mul_(0.9).add_(live[i].second.detach(), 0.1);
  }

  void begin_epoch() override {
    if (is(op_, "rebuild_optimizer_each_epoch") && epoch_ > 0) {
      // `for epoch in ...: optimizer = SGD(model.parameters(), ...); scheduler = ...(optimizer)`. The
      // schedule is made for the new optimizer before the old one goes (it refers to it).
      std::unique_ptr<torch::optim::Optimizer> fresh = make_optimizer_for(parameters());
      scheduler_ = make_schedule(*fresh);
      optimizer_ = std::move(fresh);
    }
    if (!is(op_, "no_train_after_eval")) module_->train();
    if (d_.is(kModel, "classifier_frozen_bn")) freeze_batch_norm();
    if (!is(op_, "skip_set_epoch") || !sampler_->has_epoch()) sampler_->set_epoch(epoch_);
  }

  uint64_t augmentation_seed(uint64_t epoch_seed, int64_t batch) const override {
    if (!is(op_, "unseeded_augmentation")) return ReferenceRun::augmentation_seed(epoch_seed, batch);
    thread_local std::mt19937_64 worker_rng{std::random_device{}()};
    return worker_rng();
  }

  at::Tensor augment_batch(const at::Tensor& inputs, uint64_t seed) const override {
    if (!d_.is(kAugmentation, "workers")) return inputs;
    return ReferenceRun::augment_batch(inputs, seed);
  }

  at::Tensor to_device(const at::Tensor& host) override {
    at::Tensor t = ReferenceRun::to_device(host);
    if (!d_.is(kAugmentation, "flip_on_device") || t.dim() != 4) return t;
    // A random horizontal flip of each image, drawn from the global generator on the training thread.
    const at::Tensor flip = torch::rand({t.size(0)}, t.options().dtype(torch::kFloat)) < 0.5;  // (B)
    return torch::where(flip.view({-1, 1, 1, 1}), t.flip({3}), t);
  }

  std::vector<ref::CheckpointPart> checkpoint_parts() override {
    std::vector<ref::CheckpointPart> parts = ReferenceRun::checkpoint_parts();
    parts.at(0) = is(op_, "lenient_load") ? lenient_model_part(model_part(false)) : model_part(is(op_, "prefixed_save"));
    if (!ema_.empty()) {
      parts.push_back({"ema",
                       [this](torch::serialize::OutputArchive& a) {
                         for (size_t i = 0; i < ema_.size(); ++i) a.write("ema." + std::to_string(i), ema_[i]);
                       },
                       [this](torch::serialize::InputArchive& a) {
                         for (size_t i = 0; i < ema_.size(); ++i) a.read("ema." + std::to_string(i), ema_[i]);
                       }});
    }
    const char* left_out = is(op_, "no_optimizer_state")   ? "optimizer"
                           : is(op_, "no_scheduler_state") ? "scheduler"
                           : is(op_, "no_rng_state")       ? "rng"
                           : is(op_, "no_sampler_state")   ? "sampler"
                           : is(op_, "no_ema_state")       ? "ema"
                           : is(op_, "no_scaler_state")    ? "scaler"
                                                           : nullptr;
    if (left_out != nullptr) {
      parts.erase(std::remove_if(parts.begin(), parts.end(), [&](const ref::CheckpointPart& p) { return p.name == left_out; }),
                  parts.end());
    }
    return parts;
  }

 private:
  // The last layer's parameters (the head: those sharing the last parameter's prefix).
  std::vector<at::Tensor> head_parameters() const {
    const auto named = module_->named_parameters();
    const std::string last = named[named.size() - 1].key();
    const std::string head = last.substr(0, last.rfind('.') + 1);
    std::vector<at::Tensor> out;
    for (const auto& p : named) {
      if (p.key().rfind(head, 0) == 0) out.push_back(p.value());
    }
    return out;
  }

  // lenient_load: what load_state_dict(strict=False) into a model wrapped under "module." does
  // with a bare checkpoint: each key looked for under "module.", skipped when absent.
  ref::CheckpointPart lenient_model_part(ref::CheckpointPart saved) {
    saved.load = [this](torch::serialize::InputArchive& a) {
      torch::NoGradGuard no_grad;
      if (d_.is(kCheckpoint, "archive")) {
        torch::serialize::InputArchive inner;
        if (a.try_read("module", inner)) Wrapper(module_).load(a);
        return;
      }
      c10::IValue v;
      std::optional<c10::Dict<c10::IValue, c10::IValue>> dict;
      if (d_.is(kCheckpoint, "state_dict_entry") && a.try_read("state_dict", v)) dict = v.toGenericDict();
      auto load = [&](const std::string& key, at::Tensor& into, bool buffer) {
        const std::string wrapped = "module." + key;
        at::Tensor t;
        if (dict) {
          if (dict->contains(wrapped)) t = dict->at(wrapped).toTensor();
        } else if (!a.try_read(wrapped, t, buffer)) {
          return;
        }
        if (t.defined()) into.copy_(t);
      };
      for (auto& p : module_->named_parameters()) load(p.key(), p.value(), false);
      for (auto& b : module_->named_buffers()) load(b.key(), b.value(), true);
    };
    return saved;
  }

  // The model's part in the draw's layout, every key under "module." where `prefixed` (prefixed_save).
  ref::CheckpointPart model_part(bool prefixed) {
    const std::string prefix = prefixed ? "module." : "";
    if (d_.is(kCheckpoint, "archive")) {
      if (prefix.empty()) return ReferenceRun::checkpoint_parts().at(0);
      return {"model", [this](torch::serialize::OutputArchive& a) { Wrapper(module_).save(a); },
              [this](torch::serialize::InputArchive& a) { Wrapper(module_).load(a); }};
    }
    if (d_.is(kCheckpoint, "state_dict_entry")) {
      return {"model",
              [this, prefix](torch::serialize::OutputArchive& a) {
                c10::Dict<std::string, at::Tensor> dict;
                for (const auto& p : module_->named_parameters()) dict.insert(prefix + p.key(), p.value().detach());
                for (const auto& b : module_->named_buffers()) dict.insert(prefix + b.key(), b.value());
                a.write("state_dict", c10::IValue(dict));
              },
              [this, prefix](torch::serialize::InputArchive& a) {
                c10::IValue v;
                a.read("state_dict", v);
                const auto dict = v.toGenericDict();
                torch::NoGradGuard no_grad;
                for (auto& p : module_->named_parameters()) p.value().copy_(dict.at(prefix + p.key()).toTensor());
                for (auto& b : module_->named_buffers()) b.value().copy_(dict.at(prefix + b.key()).toTensor());
              }};
    }
    return {"model",
            [this, prefix](torch::serialize::OutputArchive& a) {
              for (const auto& p : module_->named_parameters()) a.write(prefix + p.key(), p.value().detach());
              for (const auto& b : module_->named_buffers()) a.write(prefix + b.key(), b.value(), /*is_buffer=*/true);
            },
            [this, prefix](torch::serialize::InputArchive& a) {
              torch::NoGradGuard no_grad;
              for (auto& p : module_->named_parameters()) {
                at::Tensor t;  // a fresh handle each time: read() into a defined tensor set_()s it
                a.read(prefix + p.key(), t);
                p.value().copy_(t);
              }
              for (auto& b : module_->named_buffers()) {
                at::Tensor t;
                a.read(prefix + b.key(), t, /*is_buffer=*/true);
                b.value().copy_(t);
              }
            }};
  }

  Draw d_;
  const Operator* op_;
  std::vector<at::Tensor> ema_;
};

}  // namespace

RecipeInfo recipe_info(uint64_t seed, const Operator* op) {
  const Draw d = draw(seed);
  RecipeInfo info;
  info.name = name_of(seed, op);
  info.file = __FILE__;
  info.line = __LINE__;
  info.make = [d, op] { return std::unique_ptr<Run>(new GeneratedRun(d, op)); };
  if (op == nullptr) {
    std::string mutants, equivalent;
    for (const Operator& o : operators()) {
      const std::string why = o.equivalent_on(d);
      if (why.empty()) {
        mutants += std::string(mutants.empty() ? "" : ", ") + o.name;
      } else {
        equivalent += std::string(equivalent.empty() ? "" : "; ") + o.name + " (" + why + ")";
      }
    }
    info.description = "generated draw: " + d.describe() + ". Mutants: " + mutants +
                       (equivalent.empty() ? "" : ". Equivalent here, left out: " + equivalent);
    info.control = true;  // correct by construction: a failing cell is the suite's false alarm
    return info;
  }
  info.description = "mutant of gen-" + std::to_string(seed) + ": " + op->mechanism;
  info.targets = {op->check};
  info.breaks[op->check] = op->promises;
  return info;
}

namespace {

// Every process that parses a --recipe asks this source for the names no registration holds.
const bool kSource [[maybe_unused]] = [] {
  Registry::global().add_recipe_source(recipes_named);
  return true;
}();

}  // namespace

}  // namespace tc::generated
