#include "reference/optimizer_state.h"

#include <sstream>

#include <torch/optim.h>
#include <torch/serialize/archive.h>

#include "reference/compat.h"

namespace tc::ref {
namespace {

void add(NamedTensors& out, const std::string& name, const char* what, const at::Tensor& t) {
  if (t.defined()) out.emplace_back(name + "." + what, t);
}

void add_step(NamedTensors& out, const std::string& name, int64_t step) {
  out.emplace_back(name + ".step", torch::full({}, step, torch::kInt64));
}

// Adam's and AdamW's states: the same buffers in two unrelated types.
template <typename State>
void add_adam_like(NamedTensors& out, const std::string& name, const State& s) {
  add(out, name, "exp_avg", s.exp_avg());
  add(out, name, "exp_avg_sq", s.exp_avg_sq());
  add(out, name, "max_exp_avg_sq", s.max_exp_avg_sq());
  add_step(out, name, s.step());
}

// A state type this file does not know: what its serialize() writes, read back (copies).
void add_serialized(NamedTensors& out, const std::string& name, const torch::optim::OptimizerParamState& s) {
  torch::serialize::OutputArchive w;
  s.serialize(w);
  std::ostringstream bytes;
  w.save_to(bytes);
  std::istringstream in(bytes.str());
  torch::serialize::InputArchive r;
  r.load_from(in);
  for (const std::string& key : r.keys()) {
    c10::IValue v;
    if (!r.try_read(key, v)) continue;
    if (v.isTensor()) out.emplace_back(name + "." + key, v.toTensor());
    else if (v.isInt()) out.emplace_back(name + "." + key, torch::full({}, v.toInt(), torch::kInt64));
    else if (v.isDouble()) out.emplace_back(name + "." + key, torch::full({}, v.toDouble(), torch::kDouble));
  }
}

}  // namespace

NamedTensors named_optimizer_state(torch::optim::Optimizer& optimizer, const NamedTensors& parameters) {
  using namespace torch::optim;
  NamedTensors out;
  auto& state = optimizer.state();
  for (const auto& [name, p] : parameters) {
    auto it = state.find(compat::optimizer_state_key(p));
    if (it == state.end()) continue;
    const OptimizerParamState& s = *it->second;
    if (const auto* sgd = dynamic_cast<const SGDParamState*>(&s)) {
      add(out, name, "momentum_buffer", sgd->momentum_buffer());
    } else if (const auto* adam = dynamic_cast<const AdamParamState*>(&s)) {
      add_adam_like(out, name, *adam);
    } else if (const auto* adamw = dynamic_cast<const AdamWParamState*>(&s)) {
      add_adam_like(out, name, *adamw);
    } else if (const auto* rms = dynamic_cast<const RMSpropParamState*>(&s)) {
      add(out, name, "square_avg", rms->square_avg());
      add(out, name, "momentum_buffer", rms->momentum_buffer());
      add(out, name, "grad_avg", rms->grad_avg());
      add_step(out, name, rms->step());
    } else if (const auto* ada = dynamic_cast<const AdagradParamState*>(&s)) {
      add(out, name, "sum", ada->sum());
      add_step(out, name, ada->step());
    } else {
      add_serialized(out, name, s);
    }
  }
  return out;
}

}  // namespace tc::ref
