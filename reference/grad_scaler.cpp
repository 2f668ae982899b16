#include "reference/grad_scaler.h"

#include <stdexcept>
#include <string>

#include <torch/torch.h>

namespace tc::ref {
namespace {

// A copy of `master` per device, made on first request (PyTorch's _MultiDeviceReplicator).
class Replicator {
 public:
  explicit Replicator(at::Tensor master) : master_(std::move(master)) {}
  at::Tensor get(const c10::Device& device) {
    for (auto& [d, t] : copies_) {
      if (d == device) return t;
    }
    at::Tensor t = master_.to(device, /*non_blocking=*/true, /*copy=*/true);
    copies_.emplace_back(device, t);
    return t;
  }
  std::vector<std::pair<c10::Device, at::Tensor>> copies() const { return copies_; }

 private:
  at::Tensor master_;
  std::vector<std::pair<c10::Device, at::Tensor>> copies_;
};

const char* kFix = " This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration.";

}  // namespace

GradScaler::GradScaler(GradScalerOptions options) : options_(options) {
  if (options_.enabled) {
    if (options_.growth_factor <= 1.0) throw std::invalid_argument("The growth factor must be > 1.0.");
    if (options_.backoff_factor >= 1.0) throw std::invalid_argument("The backoff factor must be < 1.0.");
  }
}

void GradScaler::check_initialised(const char* function) const {
  if (!scale_.defined() || !growth_tracker_.defined()) {
    throw std::logic_error(std::string("Attempted ") + function + " but _scale is None." + kFix);
  }
}

at::Tensor GradScaler::scale(const at::Tensor& outputs) {
  if (!options_.enabled) return outputs;
  if (!scale_.defined()) {
    scale_ = torch::full({}, options_.init_scale, torch::dtype(torch::kFloat32).device(outputs.device()));
    growth_tracker_ = torch::full({}, init_growth_tracker_, torch::dtype(torch::kInt32).device(outputs.device()));
  }
  return outputs * scale_.to(outputs.device(), /*non_blocking=*/true);
}

std::vector<std::pair<c10::Device, at::Tensor>> GradScaler::unscale_grads(torch::optim::Optimizer& optimizer,
                                                                          const at::Tensor& inv_scale,
                                                                          const at::Tensor& found_inf,
                                                                          bool allow_fp16) {
  Replicator per_device_inv_scale(inv_scale);
  Replicator per_device_found_inf(found_inf);
  // Grouped by device, then dtype: one fused ATen call per group.
  std::vector<std::pair<c10::Device, std::vector<std::pair<c10::ScalarType, std::vector<at::Tensor>>>>> groups;
  torch::NoGradGuard no_grad;
  for (auto& group : optimizer.param_groups()) {
    for (auto& param : group.params()) {
      at::Tensor grad = param.mutable_grad();
      if (!grad.defined()) continue;
      if (!allow_fp16 && grad.scalar_type() == at::kHalf) {
        throw std::invalid_argument("Attempting to unscale FP16 gradients.");
      }
      at::Tensor to_unscale;
      if (grad.is_sparse()) {
        // Duplicate indices of scaled fp16 values may overflow once summed: check the coalesced ones.
        if (grad.scalar_type() == at::kHalf) {
          param.mutable_grad() = grad.coalesce();
          grad = param.mutable_grad();
        }
        to_unscale = grad._values();
      } else {
        to_unscale = grad;
      }
      auto dev = std::find_if(groups.begin(), groups.end(),
                              [&](const auto& g) { return g.first == to_unscale.device(); });
      if (dev == groups.end()) {
        groups.emplace_back(to_unscale.device(), decltype(groups)::value_type::second_type{});
        dev = std::prev(groups.end());
      }
      auto dt = std::find_if(dev->second.begin(), dev->second.end(),
                             [&](const auto& g) { return g.first == to_unscale.scalar_type(); });
      if (dt == dev->second.end()) {
        dev->second.emplace_back(to_unscale.scalar_type(), std::vector<at::Tensor>{});
        dt = std::prev(dev->second.end());
      }
      dt->second.push_back(to_unscale);
    }
  }
  for (auto& [device, per_dtype] : groups) {
    for (auto& [dtype, grads] : per_dtype) {
      at::Tensor f = per_device_found_inf.get(device);
      at::_amp_foreach_non_finite_check_and_unscale_(grads, f, per_device_inv_scale.get(device));
    }
  }
  return per_device_found_inf.copies();
}

void GradScaler::unscale_(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  check_initialised("unscale_");
  PerOptimizer& state = per_optimizer_[&optimizer];
  if (state.stage == Stage::kUnscaled) {
    throw std::logic_error("unscale_() has already been called on this optimizer since the last update().");
  }
  if (state.stage == Stage::kStepped) throw std::logic_error("unscale_() is being called after step().");
  // FP32 division can be imprecise for certain compile options: the reciprocal is taken in FP64.
  at::Tensor inv_scale = scale_.to(at::kDouble).reciprocal().to(at::kFloat);
  at::Tensor found_inf = torch::full({}, 0.0, torch::dtype(torch::kFloat32).device(scale_.device()));
  state.found_inf_per_device = unscale_grads(optimizer, inv_scale, found_inf, /*allow_fp16=*/false);
  state.stage = Stage::kUnscaled;
}

bool GradScaler::step(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return true;
  }
  check_initialised("step");
  PerOptimizer& state = per_optimizer_[&optimizer];
  if (state.stage == Stage::kStepped) {
    throw std::logic_error("step() has already been called since the last update().");
  }
  if (state.stage == Stage::kReady) unscale_(optimizer);
  if (state.found_inf_per_device.empty()) {
    throw std::logic_error("No inf checks were recorded for this optimizer.");
  }
  double found = 0.0;
  for (const auto& [device, f] : state.found_inf_per_device) found += f.item<double>();
  bool stepped = false;
  if (found == 0.0) {
    optimizer.step();
    stepped = true;
  }
  state.stage = Stage::kStepped;
  return stepped;
}

void GradScaler::update() {
  if (!options_.enabled) return;
  check_initialised("update");
  std::vector<at::Tensor> found_infs;
  for (const auto& [opt, state] : per_optimizer_) {
    for (const auto& [device, f] : state.found_inf_per_device) {
      found_infs.push_back(f.to(scale_.device(), /*non_blocking=*/true));
    }
  }
  if (found_infs.empty()) throw std::logic_error("No inf checks were recorded prior to update.");
  at::Tensor combined = found_infs[0];
  for (size_t i = 1; i < found_infs.size(); ++i) combined += found_infs[i];
  at::_amp_update_scale_(scale_, growth_tracker_, combined, options_.growth_factor, options_.backoff_factor,
                         options_.growth_interval);
  per_optimizer_.clear();
}

void GradScaler::update(double new_scale) {
  if (!options_.enabled) return;
  check_initialised("update");
  scale_.fill_(new_scale);
  per_optimizer_.clear();
}

double GradScaler::get_scale() const {
  if (!options_.enabled) return 1.0;
  return scale_.defined() ? scale_.item<double>() : options_.init_scale;
}

int64_t GradScaler::growth_tracker() const {
  if (!options_.enabled) return 0;
  return growth_tracker_.defined() ? growth_tracker_.item<int64_t>() : init_growth_tracker_;
}

std::optional<GradScalerState> GradScaler::state_dict() const {
  if (!options_.enabled) return std::nullopt;
  return GradScalerState{get_scale(), options_.growth_factor, options_.backoff_factor,
                         options_.growth_interval, growth_tracker()};
}

void GradScaler::load_state_dict(const std::optional<GradScalerState>& state) {
  if (!options_.enabled) return;
  if (!state) {
    throw std::invalid_argument(
        "The source state dict is empty, possibly because it was saved from a disabled instance of GradScaler.");
  }
  options_.init_scale = state->scale;
  if (scale_.defined()) scale_.fill_(state->scale);
  options_.growth_factor = state->growth_factor;
  options_.backoff_factor = state->backoff_factor;
  options_.growth_interval = state->growth_interval;
  init_growth_tracker_ = state->growth_tracker;
  if (growth_tracker_.defined()) growth_tracker_.fill_(state->growth_tracker);
}

void GradScaler::save(torch::serialize::OutputArchive& archive) const {
  auto s = state_dict();
  if (!s) return;
  archive.write("scale", c10::IValue(s->scale));
  archive.write("growth_factor", c10::IValue(s->growth_factor));
  archive.write("backoff_factor", c10::IValue(s->backoff_factor));
  archive.write("growth_interval", c10::IValue(s->growth_interval));
  archive.write("_growth_tracker", c10::IValue(s->growth_tracker));
}

void GradScaler::load(torch::serialize::InputArchive& archive) {
  if (!options_.enabled) return;
  c10::IValue v;
  if (!archive.try_read("scale", v)) {
    throw std::runtime_error(
        "The source state dict is empty, possibly because it was saved from a disabled instance of GradScaler.");
  }
  GradScalerState s;
  s.scale = v.toDouble();
  archive.read("growth_factor", v);
  s.growth_factor = v.toDouble();
  archive.read("backoff_factor", v);
  s.backoff_factor = v.toDouble();
  archive.read("growth_interval", v);
  s.growth_interval = v.toInt();
  archive.read("_growth_tracker", v);
  s.growth_tracker = v.toInt();
  load_state_dict(s);
}

}  // namespace tc::ref
