#include "reference/distributed_run.h"

#include <torch/torch.h>

#include "harness/util/atomic_file.h"

namespace tc::ref {

DistributedReference::DistributedReference() = default;
DistributedReference::~DistributedReference() = default;

at::Tensor DistributedReference::forward(torch::nn::Module& model, const at::Tensor& x) {
  auto* sequential = dynamic_cast<torch::nn::SequentialImpl*>(&model);
  if (sequential == nullptr) {
    throw std::invalid_argument("DistributedReference::forward: the model is not a Sequential; a recipe whose "
                                "build_model() returns another module overrides forward()");
  }
  return sequential->forward(x);
}

std::shared_ptr<torch::nn::Module> DistributedReference::build_model() const {
  torch::manual_seed(static_cast<uint64_t>(options_.seed));  // every rank builds the same weights
  namespace nn = torch::nn;
  auto m = std::make_shared<nn::SequentialImpl>(
      nn::Conv2d(nn::Conv2dOptions(3, 8, 3).padding(1)),  // (B, 8, 8, 8)
      nn::GroupNorm(nn::GroupNormOptions(2, 8)),
      nn::ReLU(),
      nn::MaxPool2d(nn::MaxPool2dOptions(2)),             // (B, 8, 4, 4)
      nn::Flatten(),                                      // (B, 128)
      nn::Linear(8 * 4 * 4, 4));                          // (B, 4)
  return m;
}

void DistributedReference::setup(const DistRunOptions& options, dist::ProcessGroup& group) {
  options_ = options;
  group_ = &group;
  data_ = std::make_shared<SyntheticImages>(DataOptions{kDatasetSize, 4, 8, 20240611});
  // LibTorch's DistributedSampler: this rank's share of a permutation drawn from the epoch.
  sampler_ = std::make_unique<torch::data::samplers::DistributedRandomSampler>(
      static_cast<size_t>(kDatasetSize), static_cast<size_t>(group.size()),
      static_cast<size_t>(group.rank()), /*allow_duplicates=*/false);
  model_ = build_model();
  model_->to(options.device);
  optimizer_ = make_optimizer(model_->parameters());
  attach_gradient_averaging();
  epoch_ = -1;
  position_ = 0;
  step_ = 0;
  losses_.clear();
}

std::unique_ptr<torch::optim::Optimizer> DistributedReference::make_optimizer(const std::vector<at::Tensor>& parameters) {
  return std::make_unique<torch::optim::SGD>(parameters, torch::optim::SGDOptions(0.05).momentum(0.9));
}

int64_t DistributedReference::steps_per_epoch() const {
  return kDatasetSize / (group_ ? group_->size() : 1) / kBatchPerRank;
}

void DistributedReference::begin_epoch(int64_t epoch) {
  sampler_->set_epoch(static_cast<size_t>(epoch));
  sampler_->reset();
}

void DistributedReference::attach_gradient_averaging() {
  reducer_ = std::make_unique<dist::GradientReducer>(*group_, model_->parameters());
}

bool DistributedReference::writes_files() const { return group_->rank() == 0; }

void DistributedReference::after_write() { group_->barrier(); }

DistStep DistributedReference::train_step() {
  if (epoch_ < 0 || position_ >= steps_per_epoch()) {
    ++epoch_;
    position_ = 0;
    begin_epoch(epoch_);
    model_->train();
  }
  const std::optional<std::vector<size_t>> drawn = sampler_->next(static_cast<size_t>(kBatchPerRank));
  if (!drawn || static_cast<int64_t>(drawn->size()) != kBatchPerRank) {
    throw std::runtime_error("the sampler ran out of samples in epoch " + std::to_string(epoch_));
  }
  std::vector<int64_t> idx(drawn->begin(), drawn->end());
  const at::Tensor index = torch::tensor(idx, torch::kLong);
  const at::Tensor x = data_->images().index_select(0, index).to(options_.device);  // (B, 3, 8, 8)
  const at::Tensor y = data_->labels().index_select(0, index).to(options_.device);  // (B)

  optimizer_->zero_grad();
  const at::Tensor loss = torch::nn::functional::cross_entropy(forward(*model_, x), y);
  if (reducer_) reducer_->prepare_for_backward({loss});
  try {
    loss.backward();  // the Reducer all-reduces bucket by bucket as gradients become ready
  } catch (const dist::PeerLost&) {
    throw;
  } catch (const std::exception& e) {
    group_->raise_lost("backward (gradient all-reduce)", e);
  }
  last_gradients_.clear();
  for (const auto& p : model_->named_parameters()) {
    last_gradients_.emplace_back(p.key(), p.value().grad().detach().to(torch::kCPU).clone());
  }
  last_x_ = x.to(torch::kCPU);
  last_y_ = y.to(torch::kCPU);
  optimizer_->step();

  DistStep r;
  r.step = step_++;
  r.epoch = epoch_;
  r.loss = loss.item<double>();
  r.samples = std::move(idx);
  ++position_;
  losses_.push_back(r.loss);
  return r;
}

NamedTensors DistributedReference::parameters() const {
  NamedTensors out;
  for (const auto& p : model_->named_parameters()) out.emplace_back(p.key(), p.value());
  return out;
}

NamedTensors DistributedReference::last_gradients() const { return last_gradients_; }

std::pair<at::Tensor, at::Tensor> DistributedReference::last_batch() const { return {last_x_, last_y_}; }

at::Tensor DistributedReference::training_loss(torch::nn::Module& model, const at::Tensor& x, const at::Tensor& y) {
  return torch::nn::functional::cross_entropy(forward(model, x.to(options_.device)), y.to(options_.device));
}

std::vector<CheckpointPart> DistributedReference::checkpoint_parts() {
  return {
      {"model", [this](torch::serialize::OutputArchive& a) { model_->save(a); },
       [this](torch::serialize::InputArchive& a) { load_module_strict(*model_, a); }},
      {"optimizer", [this](torch::serialize::OutputArchive& a) { optimizer_->save(a); },
       [this](torch::serialize::InputArchive& a) { optimizer_->load(a); }},
      {"progress",
       [this](torch::serialize::OutputArchive& a) {
         a.write("epoch", c10::IValue(epoch_));
         a.write("position", c10::IValue(position_));
         a.write("step", c10::IValue(step_));
       },
       [this](torch::serialize::InputArchive& a) {
         c10::IValue v;
         a.read("epoch", v);
         epoch_ = v.toInt();
         a.read("position", v);
         position_ = v.toInt();
         a.read("step", v);
         step_ = v.toInt();
       }},
  };
}

std::string DistributedReference::save_checkpoint() {
  const std::string path = options_.out_dir + "/checkpoint.pt";
  if (writes_files()) save_parts(checkpoint_parts(), path);  // the unwrapped model: no "module." keys
  after_write();
  return path;
}

void DistributedReference::load_checkpoint(const std::string& path) {
  // Load into the unwrapped model, then wrap: loading sets the parameters' storage anew (set_),
  // and a Reducer made before no longer averaged their gradients (replicas diverged after resume,
  // seen with torch 2.15). The new Reducer broadcasts rank 0's (just loaded) weights.
  reducer_.reset();
  load_parts(checkpoint_parts(), path, options_.device);
  attach_gradient_averaging();
  if (epoch_ >= 0) {  // the sampler where the checkpoint left it: this epoch's order, position on
    begin_epoch(epoch_);
    for (int64_t b = 0; b < position_; ++b) sampler_->next(static_cast<size_t>(kBatchPerRank));
    model_->train();
  }
}

std::string DistributedReference::write_report() {
  const std::string path = options_.out_dir + "/report.json";
  if (writes_files()) {
    nlohmann::json j = {{"steps", step_}, {"epoch", epoch_}, {"losses", losses_},
                        {"world_size", group_->size()}};
    write_file_atomically(path, j.dump(2) + "\n");
  }
  after_write();
  return path;
}

std::shared_ptr<torch::nn::Module> DistributedReference::bare_model() {
  return build_model();
}

}  // namespace tc::ref
