// step_hygiene's independent computation of one step: a fresh run of the recipe loaded from the
// checkpoint the step began from (or a freshly built optimizer over its weights), the observed
// gradient set, clipped, one step of the recipe's optimizer; and the floating-point bound its
// result is compared within (derived at the top of suites/step_hygiene/check.cpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "harness/contract/registry.h"
#include "harness/contract/run.h"
#include "suites/support/optimizer_view.h"
#include "suites/support/tolerance.h"

namespace tc::step_hygiene {

// One step computed independently: a fresh run of the recipe loaded from `before`, its gradients set
// to `grads` (undefined: none), clipped to max_norm with clip_grad_norm_ (0: not clipped), one step
// of its optimizer.
struct Replayed {
  NamedTensors loaded_params, loaded_state;  // right after load_checkpoint
  std::vector<double> loaded_lrs;
  std::vector<at::Tensor> clipped;  // what the optimizer saw, per parameter (CPU; undefined: none)
  NamedTensors after;               // the parameters after the step
  double lr = 0.0;                  // the largest learning rate of the param groups
  // Not SGD: the measured first-order response S per parameter (see the top of the file) and the
  // optimizer's counted roundings on the update, c_opt.
  NamedTensors sensitivity;
  double update_roundings = 2.0;
};

// The gradients on `params` (CPU copies; undefined where a parameter has none).
std::vector<at::Tensor> grads_of(const NamedTensors& params);
// c_opt for the update rules of torch.optim by name (0: SGD, whose bound is derived in full).
double update_roundings(OptimizerProbe& o, std::string* name = nullptr);
// A fresh run of the recipe whose parameters are set to `params`: its optimizer and schedule are
// as the recipe builds them, with no state yet (a freshly built optimizer over these weights).
std::unique_ptr<Run> fresh_optimizer_over(const CheckContext& ctx, const RunOptions& opts, const NamedTensors& params);
// `clip_only` (null: every parameter with a gradient): the parameters clip_grad_norm_ is given.
// `fresh_optimizer_from` (null: the run loaded from `before`): the step taken by a freshly built
// optimizer over these parameters instead (fresh_optimizer_over).
Replayed replay(const CheckContext& ctx, const RunOptions& opts, const std::string& before,
                const std::vector<at::Tensor>& grads, double max_norm, const std::vector<bool>* clip_only = nullptr,
                const NamedTensors* fresh_optimizer_from = nullptr);
// Per element: u * (2 |p'| + 2 |p' - p| + lr * (kappa + 2) * |g_c|) for SGD, else
// u * (4 |p'| + c_opt |p' - p|) + S.
NamedTensors update_bound(const NamedTensors& start, const Replayed& r, double kappa);
// The recipe's parameters after its step against the replay's, within the bound.
Tolerance against(const NamedTensors& recipe_after, const NamedTensors& start, const Replayed& r, double kappa);
double l2(const std::vector<at::Tensor>& gs);
std::string times(double ratio);

}  // namespace tc::step_hygiene
