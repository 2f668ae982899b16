// step_hygiene's replay of one step (see the top of suites/step_hygiene/check.cpp for the bound).
#include "suites/step_hygiene/replay.h"

#include <algorithm>
#include <cmath>

#include <torch/torch.h>

#include "harness/util/text_format.h"
#include "suites/support/kit.h"
#include "suites/support/optimizer_view.h"
#include "suites/support/tensor_compare.h"
#include "suites/support/tolerance.h"

namespace tc::step_hygiene {

namespace {

// The relative difference two correct clipped gradients may have: (kappa + 2) u, kappa as above.
double gradient_slack(const std::vector<at::Tensor>& grads, double max_norm) {
  int64_t n = 0, m = 0;
  double u = 0.0;
  for (const auto& g : grads) {
    if (!g.defined()) continue;
    n += g.numel();
    ++m;
    u = std::max(u, unit_roundoff_of(g.scalar_type()));
  }
  const double kappa = max_norm > 0 ? static_cast<double>(n + 2 * m + 8) : 0.0;
  return (kappa + 2) * u;
}

void set_grads(NamedTensors& ps, const std::vector<at::Tensor>& grads, double factor, std::vector<at::Tensor>* with) {
  for (size_t i = 0; i < ps.size(); ++i) {
    if (i >= grads.size() || !grads[i].defined()) continue;
    at::Tensor g = grads[i].to(ps[i].second.device());
    ps[i].second.mutable_grad() = factor == 1.0 ? g.clone() : (g.to(torch::kDouble) * factor).to(g.scalar_type());
    if (with) with->push_back(ps[i].second);
  }
}

}  // namespace

// The gradients on `params` (CPU copies; undefined where a parameter has none).
std::vector<at::Tensor> grads_of(const NamedTensors& params) {
  std::vector<at::Tensor> out;
  for (const auto& [n, p] : params) out.push_back(p.grad().defined() ? p.grad().detach().cpu().clone() : at::Tensor());
  return out;
}

// c_opt for the update rules of torch.optim by name (0: SGD, whose bound is derived in full above).
double update_roundings(OptimizerProbe& o, std::string* name) {
  const std::string a = o.optimizer_algorithm();
  auto named = [&](const std::string& n, double c) {
    if (name) *name = n;
    return c;
  };
  if (a == "SGD") return named(a, 0.0);
  if (a == "AdamW" || a == "Adam" || a == "RMSprop") return named(a, 14.0);
  if (a == "Adagrad") return named(a, 12.0);
  return named(a + ", an optimizer torchconform does not know (16 roundings assumed on its update)", 16.0);
}

// A fresh run of the recipe whose parameters are set to `params`: its optimizer and schedule are
// as the recipe builds them, with no state yet (a freshly built optimizer over these weights).
std::unique_ptr<Run> fresh_optimizer_over(const CheckContext& ctx, const RunOptions& opts, const NamedTensors& params) {
  std::unique_ptr<Run> r = fresh_run(ctx, opts);
  torch::NoGradGuard no_grad;
  NamedTensors ps = r->parameters();
  for (size_t i = 0; i < ps.size() && i < params.size(); ++i) ps[i].second.copy_(params[i].second);
  return r;
}

// `clip_only` (null: every parameter with a gradient): the parameters clip_grad_norm_ is given.
// `fresh_optimizer_from` (null: the run loaded from `before`): the step taken by a freshly built
// optimizer over these parameters instead (fresh_optimizer_over).
Replayed replay(const CheckContext& ctx, const RunOptions& opts, const std::string& before,
                const std::vector<at::Tensor>& grads, double max_norm, const std::vector<bool>* clip_only,
                const NamedTensors* fresh_optimizer_from) {
  std::unique_ptr<Run> r;
  if (fresh_optimizer_from != nullptr) {
    r = fresh_optimizer_over(ctx, opts, *fresh_optimizer_from);
  } else {
    r = fresh_run(ctx, opts);
    r->load_checkpoint(before);
  }
  Replayed out;
  out.loaded_params = snapshot(r->parameters());
  out.loaded_state = snapshot(r->optimizer_state());
  const std::shared_ptr<OptimizerProbe> opt = optimizer_of(*r);
  out.loaded_lrs = learning_rates(*opt);
  for (double lr : out.loaded_lrs) out.lr = std::max(out.lr, lr);
  NamedTensors ps = r->parameters();
  std::vector<at::Tensor> with_grad;
  set_grads(ps, grads, 1.0, &with_grad);
  if (clip_only != nullptr) {
    with_grad.clear();
    for (size_t i = 0; i < ps.size() && i < grads.size() && i < clip_only->size(); ++i) {
      if (grads[i].defined() && (*clip_only)[i]) with_grad.push_back(ps[i].second);
    }
  }
  if (max_norm > 0 && !with_grad.empty()) torch::nn::utils::clip_grad_norm_(with_grad, max_norm);
  out.clipped = grads_of(ps);
  opt->optimizer_step();
  out.after = snapshot(r->parameters());
  out.update_roundings = update_roundings(*opt);
  if (out.update_roundings > 0) {
    // The same step from the same state with the clipped gradient scaled by (1 + s).
    std::shared_ptr<OptimizerProbe> o2 = opt;
    if (fresh_optimizer_from != nullptr) {
      r = fresh_optimizer_over(ctx, opts, *fresh_optimizer_from);
      o2 = optimizer_of(*r);
    } else {
      r->load_checkpoint(before);
    }
    NamedTensors again = r->parameters();
    set_grads(again, out.clipped, 1.0 + gradient_slack(grads, max_norm), nullptr);
    o2->optimizer_step();
    const NamedTensors moved = snapshot(r->parameters());
    for (size_t i = 0; i < moved.size(); ++i) {
      out.sensitivity.emplace_back(
          moved[i].first, (moved[i].second.to(torch::kDouble) - out.after[i].second.to(torch::kDouble)).abs());
    }
  }
  return out;
}

// Per element: u * (2 |p'| + 2 |p' - p| + lr * (kappa + 2) * |g_c|) for SGD, else
// u * (4 |p'| + c_opt |p' - p|) + S (see the top of the file).
NamedTensors update_bound(const NamedTensors& start, const Replayed& r, double kappa) {
  NamedTensors b;
  for (size_t i = 0; i < r.after.size(); ++i) {
    const at::Tensor after = r.after[i].second.to(torch::kDouble);
    const double u = unit_roundoff_of(r.after[i].second.scalar_type());
    if (r.update_roundings > 0) {
      at::Tensor t = u * (4 * after.abs() + r.update_roundings * (after - start[i].second.to(torch::kDouble)).abs());
      if (i < r.sensitivity.size()) t = t + r.sensitivity[i].second;
      b.emplace_back(r.after[i].first, t);
      continue;
    }
    at::Tensor t = 2 * after.abs() + 2 * (after - start[i].second.to(torch::kDouble)).abs();
    if (i < r.clipped.size() && r.clipped[i].defined()) t = t + r.lr * (kappa + 2) * r.clipped[i].to(torch::kDouble).abs();
    b.emplace_back(r.after[i].first, u * t);
  }
  return b;
}

Tolerance against(const NamedTensors& recipe_after, const NamedTensors& start, const Replayed& r, double kappa) {
  return compare_within(recipe_after, r.after, update_bound(start, r, kappa));
}

double l2(const std::vector<at::Tensor>& gs) {
  double s = 0.0;
  for (const auto& g : gs) {
    if (g.defined()) s += g.to(torch::kDouble).pow(2).sum().item<double>();
  }
  return std::sqrt(s);
}

std::string times(double ratio) { return fmt::sig(ratio, 3) + "x the bound"; }

}  // namespace tc::step_hygiene
