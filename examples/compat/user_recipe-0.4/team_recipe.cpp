// A team's own training code, checked by torchconform.
//
// The first half is training code as a team would write it anyway: a small MLP that classifies
// synthetic tabular data, AdamW with a step-decay learning rate, gradient clipping, a seeded
// shuffle, and a checkpoint that holds the full training state; the same training data-parallel
// under torchrun (gradients averaged by hand with the c10d process group). The second half is all
// that torchconform needs: a tc::Run that drives it (harness/contract/run.h), a DistributedRecipe
// for the data-parallel trainer (harness/contract/distributed_probe.h) and one TC_RECIPE line.
// Linked with torchconform::suite, `team_checks run --recipe team_mlp` runs every check on it.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "harness/contract/distributed_probe.h"
#include "harness/contract/registry.h"
#include "harness/contract/run.h"
#include "reference/distributed.h"  // the c10d process group torchrun's workers share

namespace team {

// =================================================================================================
// The team's training code (knows nothing of torchconform).
// =================================================================================================

struct Config {
  int64_t features = 12;
  int64_t hidden = 32;
  int64_t classes = 3;
  int64_t train_size = 256;
  int64_t eval_size = 128;
  int64_t batch_size = 32;
  int64_t eval_batch_size = 64;
  uint64_t data_seed = 7;  // the data is fixed, like a table on disk; the run's seed does not move it
  double lr = 3e-3;
  double weight_decay = 1e-2;
  double lr_decay = 0.9;  // lr = lr * lr_decay^(step / lr_decay_every)
  int64_t lr_decay_every = 4;
  double clip_norm = 1.0;
  double dropout = 0.1;
  bool batch_norm = true;  // off for data-parallel training: per-rank batch statistics
};

struct Table {
  torch::Tensor x;  // (N, F) float32
  torch::Tensor y;  // (N) int64
};

// Gaussian rows labelled by one fixed random linear teacher (argmax of x W + noise).
void make_tables(const Config& c, Table& train, Table& eval) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(c.data_seed);
  const torch::Tensor teacher = torch::randn({c.features, c.classes}, gen);  // (F, C)
  auto draw = [&](int64_t n) {
    Table t;
    t.x = torch::randn({n, c.features}, gen);                                       // (n, F)
    t.y = (t.x.matmul(teacher) + 0.1 * torch::randn({n, c.classes}, gen)).argmax(1);  // (n)
    return t;
  };
  train = draw(c.train_size);
  eval = draw(c.eval_size);
}

struct MLPImpl : torch::nn::Module {
  explicit MLPImpl(const Config& c)
      : fc1(register_module("fc1", torch::nn::Linear(c.features, c.hidden))),
        drop(register_module("drop", torch::nn::Dropout(c.dropout))),
        fc2(register_module("fc2", torch::nn::Linear(c.hidden, c.classes))) {
    if (c.batch_norm) bn = register_module("bn", torch::nn::BatchNorm1d(c.hidden));
    // Explicit initialisation (LibTorch's defaults differ between layers and releases):
    // linear weights kaiming-normal (fan_in, relu), biases 0, BatchNorm weight 1 / bias 0.
    torch::NoGradGuard no_grad;
    for (torch::nn::Linear* fc : {&fc1, &fc2}) {
      torch::nn::init::kaiming_normal_((*fc)->weight, 0.0, torch::kFanIn, torch::kReLU);
      torch::nn::init::zeros_((*fc)->bias);
    }
    if (bn) {
      torch::nn::init::ones_(bn->weight);
      torch::nn::init::zeros_(bn->bias);
    }
  }

  torch::Tensor forward(torch::Tensor x) {  // (B, F)
    x = fc1(x);                             // (B, H)
    x = torch::relu(bn ? bn(x) : x);        // (B, H)
    x = drop(x);                            // (B, H)
    return fc2(x);                          // (B, C) logits
  }

  torch::nn::Linear fc1;
  torch::nn::BatchNorm1d bn{nullptr};
  torch::nn::Dropout drop;
  torch::nn::Linear fc2;
};
TORCH_MODULE(MLP);

struct StepInfo {
  double loss = 0.0;
  double lr = 0.0;
  int64_t epoch = 0;
  int64_t step = 0;
  bool training = false;
};

struct EvalInfo {
  double loss = 0.0;
  double accuracy = 0.0;
  torch::Tensor logits;  // (N, C)
};

torch::Tensor generator_state(at::Generator g) {
  std::lock_guard<std::mutex> lock(g.mutex());
  return g.get_state();
}

void set_generator_state(at::Generator g, const torch::Tensor& state) {
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_state(state.cpu());
}

int64_t read_int(torch::serialize::InputArchive& ar, const std::string& key) {
  c10::IValue v;
  ar.read(key, v);
  return v.toInt();
}

// Step decay, both trainers' schedule: lr = lr * lr_decay^(step / lr_decay_every).
void apply_step_decay(const Config& c, torch::optim::Optimizer& optimizer, int64_t step) {
  const double lr = c.lr * std::pow(c.lr_decay, static_cast<double>(step / c.lr_decay_every));
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

// What both trainers' checkpoints hold besides their own: the model, the optimizer, the progress.
struct Progress {
  int64_t epoch = 0, position = 0, step = 0;
};

void write_training_state(torch::serialize::OutputArchive& root, const torch::nn::Module& model_in,
                          const torch::optim::Optimizer& optimizer_in, const Progress& p) {
  torch::serialize::OutputArchive model, optimizer;
  model_in.save(model);
  optimizer_in.save(optimizer);
  root.write("model", model);
  root.write("optimizer", optimizer);
  root.write("epoch", c10::IValue(p.epoch));
  root.write("position", c10::IValue(p.position));
  root.write("step", c10::IValue(p.step));
}

Progress read_training_state(torch::serialize::InputArchive& root, torch::nn::Module& model_out,
                             torch::optim::Optimizer& optimizer_out) {
  torch::serialize::InputArchive model, optimizer;
  root.read("model", model);
  root.read("optimizer", optimizer);
  model_out.load(model);
  optimizer_out.load(optimizer);
  return {read_int(root, "epoch"), read_int(root, "position"), read_int(root, "step")};
}

class Trainer {
 public:
  Trainer(Config config, torch::Device device, int64_t seed, bool deterministic)
      : config_(std::move(config)), device_(device) {
    // Seed every generator the run uses: torch's (init, dropout) and the shuffle's own.
    if (deterministic && device_.is_cuda()) setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
    at::globalContext().setDeterministicAlgorithms(deterministic, /*warn_only=*/false);
    at::globalContext().setDeterministicCuDNN(deterministic);
    at::globalContext().setBenchmarkCuDNN(!deterministic);
    torch::manual_seed(static_cast<uint64_t>(seed));
    shuffle_ = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed));

    make_tables(config_, train_, eval_);
    model_ = MLP(config_);
    model_->to(device_);
    optimizer_ = std::make_unique<torch::optim::AdamW>(
        model_->parameters(), torch::optim::AdamWOptions(config_.lr).weight_decay(config_.weight_decay));
    apply_schedule();
    order_ = torch::randperm(train_.x.size(0), shuffle_, torch::kLong);  // epoch 0
  }

  int64_t steps_per_epoch() const { return config_.train_size / config_.batch_size; }

  StepInfo train_step() {
    if (position_ == steps_per_epoch()) {  // next epoch: a new order from the shuffle's generator
      ++epoch_;
      position_ = 0;
      order_ = torch::randperm(train_.x.size(0), shuffle_, torch::kLong);
    }
    model_->train();
    StepInfo info;
    info.epoch = epoch_;
    info.step = step_;
    info.lr = optimizer_->param_groups().at(0).options().get_lr();
    info.training = model_->is_training();

    const torch::Tensor idx = order_.narrow(0, position_ * config_.batch_size, config_.batch_size);  // (B)
    const torch::Tensor x = train_.x.index_select(0, idx).to(device_);  // (B, F)
    const torch::Tensor y = train_.y.index_select(0, idx).to(device_);  // (B)
    torch::Tensor loss = torch::nn::functional::cross_entropy(model_->forward(x), y);
    optimizer_->zero_grad(/*set_to_none=*/true);
    loss.backward();
    torch::nn::utils::clip_grad_norm_(model_->parameters(), config_.clip_norm);
    optimizer_->step();
    ++position_;
    ++step_;
    apply_schedule();  // after the step, as a scheduler steps
    info.loss = loss.item<double>();
    return info;
  }

  EvalInfo evaluate() {
    torch::NoGradGuard no_grad;
    model_->eval();
    EvalInfo r;
    std::vector<torch::Tensor> logits;
    double loss_sum = 0.0;
    int64_t correct = 0;
    const int64_t n = eval_.x.size(0);
    for (int64_t start = 0; start < n; start += config_.eval_batch_size) {
      const int64_t len = std::min(config_.eval_batch_size, n - start);
      const torch::Tensor x = eval_.x.narrow(0, start, len).to(device_);  // (b, F)
      const torch::Tensor y = eval_.y.narrow(0, start, len).to(device_);  // (b)
      const torch::Tensor out = model_->forward(x);                       // (b, C)
      loss_sum += torch::nn::functional::cross_entropy(
                      out, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                      .item<double>();
      correct += out.argmax(1).eq(y).sum().item<int64_t>();
      logits.push_back(out);
    }
    r.loss = loss_sum / static_cast<double>(n);
    r.accuracy = static_cast<double>(correct) / static_cast<double>(n);
    r.logits = torch::cat(logits);
    return r;
  }

  // Eval-mode forward without autograd; leaves the model's mode as it was.
  torch::Tensor predict(const torch::Tensor& x) {
    const bool was_training = model_->is_training();
    torch::NoGradGuard no_grad;
    model_->eval();
    torch::Tensor out = model_->forward(x);
    model_->train(was_training);
    return out;
  }

  // The full training state, written atomically (temporary file, then rename).
  void save(const std::string& path) {
    torch::serialize::OutputArchive root;
    write_training_state(root, *model_, *optimizer_, {epoch_, position_, step_});
    root.write("order", order_);
    root.write("rng_cpu", generator_state(at::globalContext().defaultGenerator(at::kCPU)));
    root.write("rng_shuffle", generator_state(shuffle_));
    if (device_.is_cuda()) root.write("rng_cuda", generator_state(at::globalContext().defaultGenerator(device_)));
    const std::string tmp = path + ".tmp";
    root.save_to(tmp);
    std::filesystem::rename(tmp, path);
  }

  void load(const std::string& path) {
    torch::serialize::InputArchive root;
    root.load_from(path, device_);
    const Progress p = read_training_state(root, *model_, *optimizer_);
    epoch_ = p.epoch;
    position_ = p.position;
    step_ = p.step;
    root.read("order", order_);
    order_ = order_.cpu();
    torch::Tensor state;
    root.read("rng_cpu", state);
    set_generator_state(at::globalContext().defaultGenerator(at::kCPU), state);
    root.read("rng_shuffle", state);
    set_generator_state(shuffle_, state);
    if (device_.is_cuda()) {
      root.read("rng_cuda", state);
      set_generator_state(at::globalContext().defaultGenerator(device_), state);
    }
    apply_schedule();
  }

  const Config& config() const { return config_; }
  const MLP& model() const { return model_; }
  torch::optim::AdamW& optimizer() { return *optimizer_; }
  const torch::optim::AdamW& optimizer() const { return *optimizer_; }
  const Table& eval_table() const { return eval_; }
  torch::Device device() const { return device_; }

 private:
  void apply_schedule() { apply_step_decay(config_, *optimizer_, step_); }

  Config config_;
  torch::Device device_;
  Table train_, eval_;
  at::Generator shuffle_;
  MLP model_{nullptr};
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  torch::Tensor order_;   // (N) this epoch's sample order
  int64_t epoch_ = 0;
  int64_t position_ = 0;  // batches consumed in this epoch
  int64_t step_ = 0;
};

// The same training data-parallel, one process per device under torchrun: each rank takes its
// share of each epoch's shuffled order, averages the gradients with the others (what DDP does), then
// clips and steps AdamW; rank 0 writes checkpoints, every rank reads them to resume. No BatchNorm
// and no dropout: per-rank batch statistics and masks would make the replicas compute other
// gradients than one process on the whole batch.
class DataParallelTrainer {
 public:
  DataParallelTrainer(torch::Device device, int64_t seed, tc::ref::dist::ProcessGroup& group, std::string out_dir)
      : device_(device), seed_(seed), group_(group), out_dir_(std::move(out_dir)) {
    config_.batch_norm = false;
    config_.dropout = 0.0;
    make_tables(config_, train_, eval_);
    model_ = build_model();  // the same initial weights on every rank
    model_->to(device_);
    optimizer_ = std::make_unique<torch::optim::AdamW>(
        model_->parameters(), torch::optim::AdamWOptions(config_.lr).weight_decay(config_.weight_decay));
    apply_schedule();
  }

  MLP build_model() const {
    torch::manual_seed(static_cast<uint64_t>(seed_));
    return MLP(config_);
  }
  int64_t per_rank() const { return config_.batch_size / group_.size(); }
  int64_t steps_per_epoch() const { return config_.train_size / group_.size() / per_rank(); }
  int64_t dataset_size() const { return config_.train_size; }

  // This rank's share of the epoch's order: every sample once across ranks, a new order each epoch,
  // the same for a given seed.
  torch::Tensor shard(int64_t epoch) const {
    at::Generator g = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed_) * 1000003u +
                                                               static_cast<uint64_t>(epoch));
    const torch::Tensor order = torch::randperm(config_.train_size, g, torch::kLong);
    return order.slice(0, group_.rank(), config_.train_size, group_.size());  // (N / world)
  }

  torch::Tensor loss_of(MLPImpl& model, const torch::Tensor& x, const torch::Tensor& y) {
    return torch::nn::functional::cross_entropy(model.forward(x), y);
  }

  tc::DistStep train_step() {
    if (epoch_ < 0 || position_ == steps_per_epoch()) {
      ++epoch_;
      position_ = 0;
      shard_ = shard(epoch_);
    }
    model_->train();
    const torch::Tensor idx = shard_.narrow(0, position_ * per_rank(), per_rank()).contiguous();  // (b)
    const torch::Tensor x = train_.x.index_select(0, idx).to(device_);               // (b, F)
    const torch::Tensor y = train_.y.index_select(0, idx).to(device_);               // (b)
    const torch::Tensor loss = loss_of(*model_, x, y);
    optimizer_->zero_grad(/*set_to_none=*/true);
    loss.backward();
    // One flat buffer of every gradient, summed over ranks (a collective takes one tensor per
    // device), then averaged and copied back.
    std::vector<torch::Tensor> grads;
    for (auto& p : model_->parameters()) grads.push_back(p.grad().flatten());
    std::vector<torch::Tensor> flat{torch::cat(grads)};
    group_.allreduce_sum(flat);
    flat[0].div_(static_cast<double>(group_.size()));
    last_gradients_.clear();
    int64_t offset = 0;
    for (const auto& p : model_->named_parameters()) {
      torch::Tensor g = p.value().grad();
      g.copy_(flat[0].narrow(0, offset, g.numel()).view_as(g));
      offset += g.numel();
      last_gradients_.emplace_back(p.key(), g.detach().cpu().clone());
    }
    last_batch_ = {x.cpu(), y.cpu()};
    torch::nn::utils::clip_grad_norm_(model_->parameters(), config_.clip_norm);
    optimizer_->step();
    tc::DistStep r;
    r.step = step_++;
    r.epoch = epoch_;
    r.loss = loss.item<double>();
    r.samples.assign(idx.data_ptr<int64_t>(), idx.data_ptr<int64_t>() + idx.numel());
    ++position_;
    apply_schedule();
    losses_.push_back(r.loss);
    return r;
  }

  // Rank 0 writes the full training state atomically; the others wait until it is there.
  std::string save() {
    const std::string path = out_dir_ + "/checkpoint.pt";
    if (group_.rank() == 0) {
      torch::serialize::OutputArchive root;
      write_training_state(root, *model_, *optimizer_, {epoch_, position_, step_});
      root.save_to(path + ".tmp");
      std::filesystem::rename(path + ".tmp", path);
    }
    group_.barrier();
    return path;
  }

  // Every rank reads the checkpoint.
  void load(const std::string& path) {
    torch::serialize::InputArchive root;
    root.load_from(path, device_);
    const Progress p = read_training_state(root, *model_, *optimizer_);
    epoch_ = p.epoch;
    position_ = p.position;
    step_ = p.step;
    if (epoch_ >= 0) shard_ = shard(epoch_);
    apply_schedule();
  }

  std::string write_report() {
    const std::string path = out_dir_ + "/report.txt";
    if (group_.rank() == 0) {
      std::ofstream out(path + ".tmp");
      for (double l : losses_) out << l << "\n";
      out.close();
      std::filesystem::rename(path + ".tmp", path);
    }
    group_.barrier();
    return path;
  }

  const MLP& model() const { return model_; }
  const tc::NamedTensors& last_gradients() const { return last_gradients_; }
  const std::pair<torch::Tensor, torch::Tensor>& last_batch() const { return last_batch_; }
  torch::Device device() const { return device_; }

 private:
  void apply_schedule() { apply_step_decay(config_, *optimizer_, step_); }

  Config config_;
  torch::Device device_;
  int64_t seed_;
  tc::ref::dist::ProcessGroup& group_;
  std::string out_dir_;
  Table train_, eval_;
  MLP model_{nullptr};
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  torch::Tensor shard_;
  int64_t epoch_ = -1, position_ = 0, step_ = 0;
  std::vector<double> losses_;
  tc::NamedTensors last_gradients_;
  std::pair<torch::Tensor, torch::Tensor> last_batch_;
};

// =================================================================================================
// What torchconform needs: a tc::Run that drives the trainer, and its registration.
// =================================================================================================

// The data-parallel trainer as the `distributed` check drives it (harness/contract/distributed_probe.h).
class TeamMlpDistributed : public tc::DistributedRecipe {
 public:
  void setup(const tc::DistRunOptions& o, tc::ref::dist::ProcessGroup& group) override {
    trainer_ = std::make_unique<DataParallelTrainer>(o.device, o.seed, group, o.out_dir);
  }
  int64_t steps_per_epoch() const override { return trainer_->steps_per_epoch(); }
  int64_t dataset_size() const override { return trainer_->dataset_size(); }
  tc::DistStep train_step() override { return trainer_->train_step(); }
  tc::NamedTensors parameters() const override {
    tc::NamedTensors out;
    for (const auto& p : trainer_->model()->named_parameters()) out.emplace_back(p.key(), p.value());
    return out;
  }
  tc::NamedTensors last_gradients() const override { return trainer_->last_gradients(); }
  std::pair<at::Tensor, at::Tensor> last_batch() const override { return trainer_->last_batch(); }
  at::Tensor training_loss(torch::nn::Module& model, const at::Tensor& x, const at::Tensor& y) override {
    return trainer_->loss_of(dynamic_cast<MLPImpl&>(model), x.to(trainer_->device()), y.to(trainer_->device()));
  }
  std::string save_checkpoint() override { return trainer_->save(); }
  void load_checkpoint(const std::string& path) override { trainer_->load(path); }
  std::string write_report() override { return trainer_->write_report(); }
  std::shared_ptr<torch::nn::Module> bare_model() override { return trainer_->build_model().ptr(); }

 private:
  std::unique_ptr<DataParallelTrainer> trainer_;
};

class TeamMlpRun : public tc::Run, public tc::DistributedProvider {
 public:
  std::unique_ptr<tc::DistributedRecipe> make_distributed() const override {
    return std::make_unique<TeamMlpDistributed>();
  }

  void setup(const tc::RunOptions& o) override {
    trainer_ = std::make_unique<Trainer>(Config{}, o.device, o.seed, o.deterministic);
  }

  tc::StepRecord train_step() override {
    const StepInfo s = trainer_->train_step();
    tc::StepRecord r;
    r.step = s.step;
    r.epoch = s.epoch;
    r.loss = s.loss;
    r.lr = s.lr;
    r.training_mode = s.training;
    return r;
  }

  tc::EvalResult evaluate() override {
    EvalInfo e = trainer_->evaluate();
    tc::EvalResult r;
    r.loss = e.loss;
    r.accuracy = e.accuracy;
    r.logits = e.logits;
    return r;
  }

  void save_checkpoint(const std::string& path) override { trainer_->save(path); }
  void load_checkpoint(const std::string& path) override { trainer_->load(path); }
  int64_t steps_per_epoch() const override { return trainer_->steps_per_epoch(); }

  tc::NamedTensors parameters() const override {
    tc::NamedTensors out;
    for (const auto& p : trainer_->model()->named_parameters()) out.emplace_back(p.key(), p.value());
    return out;
  }

  tc::NamedTensors buffers() const override {
    tc::NamedTensors out;
    for (const auto& b : trainer_->model()->named_buffers()) out.emplace_back(b.key(), b.value());
    return out;
  }

  tc::NamedTensors optimizer_state() const override {
    tc::NamedTensors out;
    const auto& state = trainer_->optimizer().state();
    for (const auto& p : trainer_->model()->named_parameters()) {
      auto it = state.find(p.value().unsafeGetTensorImpl());  // keyed by TensorImpl* (LibTorch 2.x)
      if (it == state.end()) continue;
      const auto& s = static_cast<const torch::optim::AdamWParamState&>(*it->second);
      out.emplace_back(p.key() + ".exp_avg", s.exp_avg());
      out.emplace_back(p.key() + ".exp_avg_sq", s.exp_avg_sq());
    }
    return out;
  }

  // --- optional probes: checks that need one skip with a reason when it is not provided ---------
  at::Tensor example_input(int64_t batch) const override {  // (B, F): tabular, so `shapes` skips
    const Table& t = trainer_->eval_table();
    return t.x.narrow(0, 0, std::min(batch, t.x.size(0))).to(trainer_->device());
  }
  at::Tensor predict(const at::Tensor& x) override { return trainer_->predict(x); }
  torch::optim::Optimizer& optimizer() override { return trainer_->optimizer(); }
  double clip_norm() const override { return trainer_->config().clip_norm; }

  std::vector<tc::InitSpec> declared_init() const override {
    // As MLPImpl's constructor does.
    std::vector<tc::InitSpec> specs;
    using K = tc::InitSpec::Kind;
    for (const auto& p : trainer_->model()->named_parameters()) {
      const std::string& name = p.key();
      const torch::Tensor& t = p.value();
      if (t.dim() == 2) {  // linear weight (out, in): kaiming-normal, fan_in, relu gain sqrt(2)
        specs.push_back({name, K::kNormal, 0.0, std::sqrt(2.0 / static_cast<double>(t.size(1)))});
      } else if (name == "bn.weight") {
        specs.push_back({name, K::kConstant, 1.0, 0.0});
      } else {  // biases
        specs.push_back({name, K::kConstant, 0.0, 0.0});
      }
    }
    return specs;
  }

 private:
  std::unique_ptr<Trainer> trainer_;
};

}  // namespace team

TC_RECIPE(team::TeamMlpRun, "team_mlp",
          "the team's MLP on tabular data: AdamW, step-decay lr, clipping, full-state "
                   "checkpoints (examples/user_recipe)");
