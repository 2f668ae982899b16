#include "reference/schedule.h"

#include <algorithm>
#include <cmath>

#include <torch/serialize/archive.h>

namespace tc::ref {

namespace {

void write_count(torch::serialize::OutputArchive& archive, const char* key, int64_t value) {
  archive.write(key, c10::IValue(value));
}

int64_t read_count(torch::serialize::InputArchive& archive, const char* key) {
  c10::IValue v;
  archive.read(key, v);
  return v.toInt();
}

}  // namespace

void save_step_count(torch::serialize::OutputArchive& archive, int64_t count) { write_count(archive, "step_count", count); }
int64_t load_step_count(torch::serialize::InputArchive& archive) { return read_count(archive, "step_count"); }
void save_updates(torch::serialize::OutputArchive& archive, int64_t updates) { write_count(archive, "updates", updates); }
int64_t load_updates(torch::serialize::InputArchive& archive) { return read_count(archive, "updates"); }

WarmupCosine::WarmupCosine(torch::optim::Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps,
                           double floor_ratio)
    : optimizer_(optimizer), warmup_(warmup_steps), total_(total_steps), floor_(floor_ratio) {
  TORCH_CHECK(warmup_steps >= 0 && total_steps > warmup_steps, "WarmupCosine: warm-up ", warmup_steps,
              " steps of ", total_steps, ": needs 0 <= warmup < total");
  for (auto& g : optimizer_.param_groups()) base_.push_back(g.options().get_lr());
  apply();
}

double WarmupCosine::factor(int64_t t) const {
  if (t < warmup_) return static_cast<double>(t + 1) / static_cast<double>(warmup_);
  const double progress =
      std::min(1.0, static_cast<double>(t - warmup_) / static_cast<double>(total_ - warmup_));
  return floor_ + (1.0 - floor_) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

void WarmupCosine::apply() {
  auto& groups = optimizer_.param_groups();
  const double f = factor(count_);
  for (size_t i = 0; i < groups.size() && i < base_.size(); ++i) groups[i].options().set_lr(base_[i] * f);
}

void WarmupCosine::step() {
  ++count_;
  apply();
}

void WarmupCosine::save(torch::serialize::OutputArchive& archive) const { save_step_count(archive, count_); }

void WarmupCosine::load(torch::serialize::InputArchive& archive) {
  count_ = load_step_count(archive);
  apply();
}

}  // namespace tc::ref
