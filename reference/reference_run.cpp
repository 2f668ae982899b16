#include "reference/reference_run.h"

#include <cmath>
#include <mutex>
#include <sstream>

#include <torch/torch.h>

#include "harness/util/atomic_file.h"
#include "reference/autocast.h"
#include "reference/compat.h"
#include "reference/optimizer_state.h"

namespace tc::ref {
namespace {

at::Tensor generator_state(at::Generator g) {
  std::lock_guard<std::mutex> lock(g.mutex());
  return g.get_state();
}

void set_generator_state(at::Generator g, const at::Tensor& state) {
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_state(state);
}

int64_t read_int(torch::serialize::InputArchive& ar, const std::string& key) {
  c10::IValue v;
  ar.read(key, v);
  return v.toInt();
}

}  // namespace

void ReferenceRun::setup(const RunOptions& options) {
  options_ = options;
  // A loader that is not handed a seeded generator gets a nondeterministic one.
  loader_generator_ = nondeterministic_generator();
  seed_everything();

  data_ = std::make_shared<SyntheticImages>(config_.data);
  eval_data_ = std::make_shared<SyntheticImages>(config_.eval_data);
  sampler_ = make_sampler_for(data_->size(), loader_generator_, data_->labels());

  module_ = new_model();
  TORCH_CHECK(module_, "new_model() (or make_model()) returned no model");
  model_ = ImageClassifier(std::dynamic_pointer_cast<ImageClassifierImpl>(module_));
  if (model_) model_->recompute_features = options_.activation_checkpointing;
  module_->to(options_.device);
  optimizer_ = make_optimizer_for(parameters());
  scheduler_ = make_schedule(*optimizer_);
  scaler_ = make_grad_scaler();
  loader_.reset();
  epoch_ = -1;
  position_ = 0;
  step_ = 0;
}

void ReferenceRun::seed_everything() {
  seed_record_ = ref::seed_everything(options_.seed, options_.deterministic, {loader_generator_});
}

std::shared_ptr<torch::nn::Module> ReferenceRun::make_model() { return build_model().ptr(); }

std::shared_ptr<torch::nn::Module> ReferenceRun::new_model() const {
  // 0.4's recipes override make_model(), which is not const: it is still what builds their model.
  return const_cast<ReferenceRun*>(this)->make_model();
}

at::Tensor ReferenceRun::model_forward(const at::Tensor& x) {
  TORCH_CHECK(model_, "the model from make_model() is not an ImageClassifier: override model_forward()");
  return model_->forward(x);
}

std::unique_ptr<torch::optim::Optimizer> ReferenceRun::make_optimizer_for(const NamedTensors& named_parameters) {
  std::vector<at::Tensor> tensors;
  for (const auto& [name, p] : named_parameters) tensors.push_back(p);
  return make_optimizer(tensors);
}

std::unique_ptr<Sampler> ReferenceRun::make_sampler_for(int64_t dataset_size, at::Generator generator,
                                                        const at::Tensor&) {
  return make_sampler(dataset_size, std::move(generator));
}

std::unique_ptr<torch::optim::Optimizer> ReferenceRun::make_optimizer(const std::vector<at::Tensor>& parameters) {
  return std::make_unique<torch::optim::SGD>(
      parameters,
      torch::optim::SGDOptions(config_.lr).momentum(config_.momentum).weight_decay(config_.weight_decay));
}

std::unique_ptr<Schedule> ReferenceRun::make_schedule(torch::optim::Optimizer& optimizer) {
  return std::make_unique<Resumable<torch::optim::StepLR>>(optimizer, config_.lr_step_size, config_.lr_gamma);
}

std::unique_ptr<Sampler> ReferenceRun::make_sampler(int64_t dataset_size, at::Generator generator) {
  return std::make_unique<SeededSampler>(dataset_size, config_.batch_size, std::move(generator), config_.drop_last);
}

ImageClassifier ReferenceRun::build_model() {
  ImageClassifier model(config_.data.classes, config_.data.image_size, config_.dropout);
  init_weights(*model);
  return model;
}

uint64_t ReferenceRun::augmentation_seed(uint64_t epoch_seed, int64_t batch) const {
  return batch_seed(epoch_seed, batch);
}

void ReferenceRun::begin_epoch() {
  module_->train();
  sampler_->set_epoch(epoch_);
}

int64_t ReferenceRun::steps_per_epoch() const {
  if (sampler_) return sampler_->batches_per_epoch();
  // Before setup(): what the default sampler will make of the configuration.
  const int64_t n = config_.data.size, b = config_.batch_size;
  return config_.drop_last ? n / b : (n + b - 1) / b;
}

Batch ReferenceRun::make_batch(int64_t index) const {
  at::Tensor idx = sampler_->batch_indices(index);  // (B)
  Batch b;
  b.index = index;
  b.images = augment_batch(data_->images().index_select(0, idx), augmentation_seed(sampler_->epoch_seed(), index));
  b.labels = data_->labels().index_select(0, idx);
  if (options_.device.is_cuda()) {
    // Pinned host memory, so the copy in train_step can be asynchronous.
    b.images = b.images.pin_memory();
    b.labels = b.labels.pin_memory();
  }
  return b;
}

at::Tensor ReferenceRun::augment_batch(const at::Tensor& inputs, uint64_t seed) const { return augment(inputs, seed); }

at::Tensor ReferenceRun::augmentation_probe_input() const {
  return data_->images().narrow(0, 0, 4);  // (4, 3, S, S)
}

LoaderOptions ReferenceRun::resolved_loader(bool host_trains) const {
  LoaderOptions o = config_.loader;
  if (o.workers < 0) o.workers = default_workers(host_trains);
  return o;
}

void ReferenceRun::start_loader(int64_t first) {
  loader_.reset();
  loader_ = std::make_unique<Loader>(first, steps_per_epoch(), resolved_loader(options_.device.is_cpu()),
                                     [this](int64_t i) { return make_batch(i); });
}

at::Tensor ReferenceRun::to_device(const at::Tensor& host) {
  return host.to(options_.device, /*non_blocking=*/true);
}

StepRecord ReferenceRun::train_step() {
  if (epoch_ < 0 || position_ >= steps_per_epoch()) {
    ++epoch_;
    position_ = 0;
    loader_.reset();
    begin_epoch();
  }
  if (!loader_) start_loader(position_);
  std::optional<Batch> batch = loader_->next();
  TORCH_CHECK(batch.has_value(), "loader ended before the epoch did");
  ++position_;

  StepRecord rec;
  rec.step = step_;
  rec.epoch = epoch_;
  rec.lr = optimizer_->param_groups().at(0).options().get_lr();
  rec.training_mode = module_->is_training();

  at::Tensor x = to_device(batch->images);  // (B, 3, S, S)
  at::Tensor y = to_device(batch->labels);  // (B)
  last_batch_ = {x.clone(), y};
  at::Tensor loss = step_loss(x.size(0), [this, &x, &y](int64_t start, int64_t n) {
    return n == x.size(0) ? forward_loss(x, y) : forward_loss(x.narrow(0, start, n), y.narrow(0, start, n));
  });
  ++slot_steps_;
  optimisation_step(loss);
  loss = reported_loss(loss);
  scheduler_->step();
  after_step();
  ++step_;
  rec.loss = loss.item<double>();
  return rec;
}

at::Tensor ReferenceRun::step_loss(int64_t batch, std::function<at::Tensor(int64_t, int64_t)> loss) {
  std::vector<int64_t> sizes = micro_batch_sizes(batch);
  int64_t total = 0;
  for (int64_t n : sizes) {
    TORCH_CHECK(n > 0, "micro_batch_sizes(", batch, "): a micro-batch of size ", n, " (each must hold a sample)");
    total += n;
  }
  TORCH_CHECK(total == batch, "micro_batch_sizes(", batch, ") adds up to ", total, ", not to the batch's ", batch);
  if (sizes.size() <= 1) return loss(0, batch);
  micro_batches_ = MicroBatches{std::move(sizes), batch, std::move(loss), at::Tensor()};
  return at::Tensor();
}

at::Tensor ReferenceRun::reported_loss(const at::Tensor& loss) {
  if (loss.defined()) return loss;
  TORCH_CHECK(micro_batches_ && micro_batches_->reported.defined(),
              "the step has micro-batches (micro_batch_sizes()) and optimisation_step() did not run them: an "
              "optimisation_step() of the recipe's own calls backward(loss), which runs each micro-batch");
  at::Tensor r = micro_batches_->reported;
  micro_batches_.reset();
  return r;
}

void ReferenceRun::backward(const at::Tensor& loss) {
  if (loss.defined()) {
    backward_micro_batch(loss);
    return;
  }
  TORCH_CHECK(micro_batches_ && !micro_batches_->reported.defined(),
              "backward(): an undefined loss and no micro-batches waiting");
  MicroBatches& m = *micro_batches_;
  int64_t start = 0;
  at::Tensor reported;
  for (int64_t n : m.sizes) {
    const at::Tensor l = weigh_micro_batch(m.loss(start, n), n, m.batch);
    backward_micro_batch(l);
    reported = reported.defined() ? reported + l.detach() : l.detach();
    start += n;
  }
  m.reported = reported;
}

at::Tensor ReferenceRun::weigh_micro_batch(const at::Tensor& loss, int64_t n, int64_t batch) {
  return loss * (static_cast<double>(n) / static_cast<double>(batch));
}

void ReferenceRun::backward_micro_batch(const at::Tensor& loss) { scaler_->scale(loss).backward(); }

std::vector<int64_t> ReferenceRun::even_split(int64_t batch, int64_t parts) {
  TORCH_CHECK(parts > 0 && parts <= batch, "even_split: ", parts, " parts of a batch of ", batch);
  std::vector<int64_t> sizes;
  for (int64_t i = 0; i < parts; ++i) sizes.push_back(batch / parts + (i < batch % parts ? 1 : 0));
  return sizes;
}

at::Tensor ReferenceRun::forward_loss(const at::Tensor& x, const at::Tensor& y) {
  at::Tensor loss = amp_forward(
      [this, &y](const at::Tensor& in) { return loss_of(model_forward(in), y); },
      x);  // scalar, fp32
  return amp_.loss_weight == 1.0 ? loss : loss * amp_.loss_weight;
}

at::Tensor ReferenceRun::amp_forward(const std::function<at::Tensor(const at::Tensor&)>& loss_of, const at::Tensor& x) {
  std::optional<AutocastGuard> autocast;
  if (amp_on()) autocast.emplace(options_.device.type(), amp_.dtype);
  return loss_of(x);
}

std::function<double()> ReferenceRun::amp_step_on(const AmpWorkload& workload) {
  TORCH_CHECK(workload.model && workload.forward, "amp_step_on: the workload has no model");
  if (!steps_through_slots()) return {};
  // This instance is given over to the workload (AmpProbe: the check makes a fresh one for each
  // call): the workload gets an optimizer, a schedule and a scaler from the recipe's own slots, held
  // in this instance's members as its own training holds them, and the step runs the recipe's
  // amp_forward() and optimisation_step() on them. Nothing is swapped in and out or lent: a recipe
  // whose step replaces its scaler, optimizer or schedule (a legitimate pattern) replaces the one
  // this instance holds, and frees it once (0.4 swapped the recipe's members through unique_ptrs and
  // freed a replaced scaler twice; a schedule made in the step over the lent optimizer dangled).
  step_parameters_ = workload.model->parameters();
  optimizer_ = make_optimizer(*step_parameters_);
  scheduler_ = make_schedule(*optimizer_);
  scaler_ = make_grad_scaler();
  after_backward_ = nullptr;
  return [this, workload] {
    const int64_t batch = workload.input.size(0);
    at::Tensor loss = step_loss(batch, [this, &workload, batch](int64_t start, int64_t n) {
      const bool whole = n == batch;
      const at::Tensor target = whole || workload.target.dim() == 0 ? workload.target : workload.target.narrow(0, start, n);
      return amp_forward([this, &workload, &target](const at::Tensor& in) { return loss_of(workload.forward(in), target); },
                         whole ? workload.input : workload.input.narrow(0, start, n));
    });
    optimisation_step(loss);
    return reported_loss(loss).item<double>();
  };
}

at::Tensor ReferenceRun::training_loss(const at::Tensor& output, const at::Tensor& target) {
  // As forward_loss computes it from the model's output.
  std::optional<AutocastGuard> autocast;
  if (amp_on()) autocast.emplace(options_.device.type(), amp_.dtype);
  at::Tensor loss = loss_of(output, target);
  return amp_.loss_weight == 1.0 ? loss : loss * amp_.loss_weight;
}

at::Tensor ReferenceRun::loss_of(const at::Tensor& output, const at::Tensor& target) {
  return torch::nn::functional::cross_entropy(output, target);
}

std::unique_ptr<GradScaler> ReferenceRun::make_grad_scaler() {
  GradScalerOptions o = amp_.scaler;
  o.enabled = amp_.dtype == c10::kHalf;  // a disabled scaler: scale, unscale_, update do nothing
  return std::make_unique<GradScaler>(o);
}

void ReferenceRun::after_backward() {
  if (after_backward_) after_backward_(parameters());
}

bool ReferenceRun::steps_through_slots() {
  if (slot_steps_ == 0) train_step();
  return slot_steps_ > 0;
}

std::vector<at::Tensor> ReferenceRun::step_parameters() const {
  return step_parameters_ ? *step_parameters_ : module_->parameters();
}

void ReferenceRun::optimisation_step(const at::Tensor& loss) {
  optimizer_->zero_grad(/*set_to_none=*/true);
  backward(loss);  // the scaled loss's backward, or each micro-batch's in turn
  after_backward();
  scaler_->unscale_(*optimizer_);  // clip the true gradients, not the scaled ones
  torch::nn::utils::clip_grad_norm_(step_parameters(), config_.clip_norm);
  scaler_->step(*optimizer_);      // skipped when a gradient is inf/NaN
  scaler_->update();
}

std::optional<GradScalerState> ReferenceRun::scaler_state() const {
  return scaler_ ? scaler_->state_dict() : std::nullopt;
}

at::Tensor ReferenceRun::example_input(int64_t batch) const {
  return eval_data_->images().narrow(0, 0, std::min(batch, eval_data_->size())).to(options_.device);
}

at::Tensor ReferenceRun::predict(const at::Tensor& x) {
  const bool was_training = module_->is_training();
  torch::NoGradGuard no_grad;
  module_->eval();
  at::Tensor out = model_forward(x);
  module_->train(was_training);
  return out;
}

std::shared_ptr<torch::nn::Module> ReferenceRun::bare_model() { return new_model(); }

at::Tensor ReferenceRun::forward_train(const at::Tensor& x) {
  module_->train();
  return model_forward(x);
}

std::vector<InitSpec> ReferenceRun::declared_init() const {
  // As init_weights() does: conv kaiming-normal (fan_out, relu), BN 1/0, linear N(0, 0.01)/0.
  if (!model_) {
    throw ProbeNotProvided("the model from make_model() is not the reference's ImageClassifier: override "
                           "declared_init() to have its initialisation checked (a model that keeps LibTorch's "
                           "defaults returns tc::ref::libtorch_default_init(*module_))");
  }
  std::vector<InitSpec> specs;
  using K = InitSpec::Kind;
  for (const auto& p : model_->named_parameters()) {
    const std::string& n = p.key();
    const at::Tensor& t = p.value();
    if (t.dim() == 4) {  // conv weight (out, in, kh, kw)
      const double fan_out = static_cast<double>(t.size(0) * t.size(2) * t.size(3));
      specs.push_back({n, K::kNormal, 0.0, std::sqrt(2.0 / fan_out)});
    } else if (t.dim() == 2) {  // linear weight
      specs.push_back({n, K::kNormal, 0.0, 0.01});
    } else if (n.find("features.1.weight") != std::string::npos) {  // BatchNorm weight
      specs.push_back({n, K::kConstant, 1.0, 0.0});
    } else {  // biases
      specs.push_back({n, K::kConstant, 0.0, 0.0});
    }
  }
  return specs;
}

EvalResult ReferenceRun::evaluate() {
  torch::NoGradGuard no_grad;
  module_->eval();
  return eval_loop();
}

EvalResult ReferenceRun::eval_loop() {
  std::vector<at::Tensor> logits;
  double loss_sum = 0.0;
  int64_t correct = 0;
  const int64_t n = eval_data_->size();
  for (int64_t start = 0; start < n; start += config_.eval_batch_size) {
    const int64_t len = std::min(config_.eval_batch_size, n - start);
    at::Tensor x = eval_data_->images().narrow(0, start, len).to(options_.device);  // (b, 3, S, S)
    at::Tensor y = eval_data_->labels().narrow(0, start, len).to(options_.device);  // (b)
    at::Tensor out = model_forward(x);                                              // (b, classes)
    loss_sum += torch::nn::functional::cross_entropy(
                    out, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                    .item<double>();
    correct += out.argmax(1).eq(y).sum().item<int64_t>();
    logits.push_back(out);
  }
  EvalResult r;
  r.loss = loss_sum / static_cast<double>(n);
  r.accuracy = static_cast<double>(correct) / static_cast<double>(n);
  r.logits = torch::cat(logits);
  return r;
}

std::vector<CheckpointPart> ReferenceRun::checkpoint_parts() {
  using torch::serialize::InputArchive;
  using torch::serialize::OutputArchive;
  std::vector<CheckpointPart> parts;
  parts.push_back({"model", [this](OutputArchive& a) { module_->save(a); },
                   [this](InputArchive& a) { load_module_strict(*module_, a); }});
  parts.push_back({"optimizer", [this](OutputArchive& a) { optimizer_->save(a); },
                   [this](InputArchive& a) { optimizer_->load(a); }});
  parts.push_back({"scheduler",
                   [this](OutputArchive& a) { scheduler_->save(a); },
                   [this](InputArchive& a) { scheduler_->load(a); }});
  parts.push_back({"scaler", [this](OutputArchive& a) { scaler_->save(a); },
                   [this](InputArchive& a) { scaler_->load(a); }});
  parts.push_back({"progress",
                   [this](OutputArchive& a) {
                     a.write("epoch", c10::IValue(epoch_));
                     a.write("step", c10::IValue(step_));
                   },
                   [this](InputArchive& a) {
                     epoch_ = read_int(a, "epoch");
                     step_ = read_int(a, "step");
                   }});
  parts.push_back({"rng",
                   [this](OutputArchive& a) {
                     a.write("torch_cpu", generator_state(at::globalContext().defaultGenerator(at::kCPU)));
                     a.write("loader", generator_state(loader_generator_));
                     if (options_.device.is_cuda()) {
                       auto g = at::globalContext().defaultGenerator(options_.device);
                       a.write("torch_cuda", generator_state(g));
                     }
                   },
                   [this](InputArchive& a) {
                     at::Tensor t;
                     a.read("torch_cpu", t);
                     set_generator_state(at::globalContext().defaultGenerator(at::kCPU), t.cpu());
                     a.read("loader", t);
                     set_generator_state(loader_generator_, t.cpu());
                     if (options_.device.is_cuda()) {
                       a.read("torch_cuda", t);
                       set_generator_state(at::globalContext().defaultGenerator(options_.device), t.cpu());
                     }
                   }});
  parts.push_back({"sampler",
                   [this](OutputArchive& a) {
                     a.write("position", c10::IValue(position_));
                     sampler_->save(a);
                   },
                   [this](InputArchive& a) {
                     position_ = read_int(a, "position");
                     sampler_->load(a);
                   }});
  return parts;
}

void ReferenceRun::save_checkpoint(const std::string& path) { save_parts(checkpoint_parts(), path); }

void ReferenceRun::load_checkpoint(const std::string& path) {
  load_parts(checkpoint_parts(), path, options_.device);
  after_loading_parts();
}

void ReferenceRun::after_loading_parts() {
  loader_.reset();
  if (!sampler_->has_epoch() && epoch_ >= 0) {
    // Nothing says where in the epoch training stopped: start the saved epoch over.
    position_ = 0;
    begin_epoch();
  }
}

NamedTensors ReferenceRun::parameters() const {
  NamedTensors out;
  for (const auto& p : module_->named_parameters()) out.emplace_back(p.key(), p.value());
  return out;
}

NamedTensors ReferenceRun::buffers() const {
  NamedTensors out;
  for (const auto& b : module_->named_buffers()) out.emplace_back(b.key(), b.value());
  return out;
}

NamedTensors ReferenceRun::optimizer_state() const {
  NamedTensors out = named_optimizer_state(*optimizer_, parameters());
  if (scaler_ && scaler_->is_enabled()) {
    // The scaler is optimisation state too: its scale and growth tracker decide future steps. Before
    // its first step (fresh, or just loaded) it holds them as the values it will start from, which
    // is what PyTorch's GradScaler.state_dict() gives then too (get_scale()): a check that compares
    // the state right after a load sees what the checkpoint restored.
    out.emplace_back("grad_scaler.scale", scaler_->scale_tensor().defined()
                                              ? scaler_->scale_tensor()
                                              : torch::full({}, scaler_->get_scale(), torch::kFloat));
    out.emplace_back("grad_scaler.growth_tracker", torch::full({}, scaler_->growth_tracker(), torch::kInt64));
  }
  return out;
}

}  // namespace tc::ref
