#include "suites/step_hygiene/experiments.h"

#include <cmath>
#include <functional>
#include <memory>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "harness/util/text_format.h"
#include "suites/support/hooks.h"
#include "suites/support/kit.h"
#include "suites/support/tensor_compare.h"

namespace tc::step_hygiene {
namespace {

// A gaussian tensor like `like` (its shape, dtype, device) with the root mean square `rms`, from a
// private generator (the default generators are not touched).
at::Tensor noise_like(const at::Tensor& like, double rms, at::Generator& gen) {
  at::Tensor n = torch::randn(like.sizes(), gen, torch::TensorOptions().dtype(torch::kFloat));
  return (n * rms).to(like.options());
}

double rms_of(const at::Tensor& g) {
  if (!g.defined() || g.numel() == 0) return 0.0;
  const double r = g.to(torch::kDouble).pow(2).mean().sqrt().item<double>();
  return r > 0 && std::isfinite(r) ? r : 0.0;
}

NamedTensors step_from(const CheckContext& ctx, const RunOptions& opts, const std::string& before,
                       const GeneratorStates& gen, const std::function<void(Run&, HookSet&)>& change) {
  std::unique_ptr<Run> r = fresh_run(ctx, opts);
  r->load_checkpoint(before);
  restore_generators(gen);
  HookSet hooks;
  if (change) change(*r, hooks);
  r->train_step();
  hooks.remove_all();
  return snapshot(r->parameters());
}

}  // namespace

Experiments run_experiments(const CheckContext& ctx, const RunOptions& opts, const std::string& before,
                            const GeneratorStates& gen, const NamedTensors& start,
                            const std::vector<at::Tensor>& fresh) {
  auto scale = [&fresh](size_t i) {
    const double r = i < fresh.size() ? rms_of(fresh[i]) : 0.0;
    return r > 0 ? r : 1e-3;
  };
  Experiments e;
  const NamedTensors as_is = step_from(ctx, opts, before, gen, nullptr);
  // 1. A gradient left on the parameters before the step (as a previous step leaves it): a step
  //    that clears gradients before its backward makes the same update.
  const NamedTensors with_stale = step_from(ctx, opts, before, gen, [&](Run& r, HookSet&) {
    at::Generator g = at::make_generator<at::CPUGeneratorImpl>(0x57a1e);
    const NamedTensors ps = r.parameters();
    for (size_t i = 0; i < ps.size(); ++i) {
      if (ps[i].second.requires_grad()) ps[i].second.mutable_grad() = noise_like(ps[i].second, scale(i), g);
    }
  });
  if (auto d = first_tensor_difference(as_is, with_stale)) {
    const NamedTensors again = step_from(ctx, opts, before, gen, nullptr);
    if (auto d2 = first_tensor_difference(as_is, again)) {
      throw SkipCell("precondition not met: the step run twice from the same checkpoint and generator states "
                     "gives two updates ('" + d2->name + "' max |diff| " + fmt::sig(d2->max_abs_diff, 3) +
                     "), so an experiment on it proves nothing; step_hygiene not judged");
    }
    e.stale_used = "the step run again from the same snapshot with a gradient left on the parameters beforehand "
                   "(gaussian, the size of this step's) makes another update ('" + d->name + "' max |diff| " +
                   fmt::sig(d->max_abs_diff, 3) + "; the same step without it is bitwise reproducible): "
                   "gradients are not cleared before backward, so they accumulate across steps";
    return e;
  }
  // 2. The backward's gradient changed on its way (a hook adds noise the size of the gradient): a
  //    step whose optimizer uses that gradient makes another update.
  if (!first_tensor_difference(start, as_is)) {
    e.held = "a gradient left before the step does not change its update (bitwise); whether the backward's "
             "gradient reaches the optimizer not judged: the step did not change any parameter";
    return e;
  }
  const NamedTensors perturbed = step_from(ctx, opts, before, gen, [&](Run& r, HookSet& hooks) {
    auto g = std::make_shared<at::Generator>(at::make_generator<at::CPUGeneratorImpl>(0x9e7));
    const NamedTensors ps = r.parameters();
    for (size_t i = 0; i < ps.size(); ++i) {
      const double rms = scale(i);
      hooks.add_replacing(ps[i].second, [g, rms](const at::Tensor& grad) { return grad + noise_like(grad, rms, *g); });
    }
  });
  if (!first_tensor_difference(as_is, perturbed)) {
    e.grad_ignored = "the step run again from the same snapshot with noise the size of the gradient added to the "
                     "backward's gradient makes bitwise the same update: the gradient backward computes never "
                     "reaches the optimizer (cleared between backward and step)";
    return e;
  }
  e.held = "a gradient left before the step does not change its update (bitwise), and the backward's gradient "
           "does (noise added to it moves the update)";
  return e;
}

}  // namespace tc::step_hygiene
