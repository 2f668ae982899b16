// registration: every parameter that shapes the output is registered, reaches the optimizer and is
// saved; a state-dict round trip into a differently-seeded fresh model reproduces the outputs
// bitwise; two eval forwards agree.
#include <optional>
#include <set>
#include <sstream>

#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/torch.h>

#include "harness/contract/scratch.h"
#include "harness/util/text_format.h"
#include "suites/support/hooks.h"
#include "suites/support/kit.h"
#include "suites/support/optimizer_view.h"
#include "suites/support/tensor_compare.h"

namespace tc {
namespace {

// The tensors that require a gradient and reach `loss` through its graph: the leaves autograd
// accumulates gradients into (AccumulateGrad nodes), each once.
std::vector<at::Tensor> graph_leaves(const at::Tensor& loss) {
  std::vector<at::Tensor> leaves;
  std::set<const torch::autograd::Node*> seen;
  std::vector<std::decay_t<decltype(loss.grad_fn())>> todo;  // the pointer type differs between LibTorch versions
  if (loss.grad_fn()) todo.push_back(loss.grad_fn());
  while (!todo.empty()) {
    auto n = std::move(todo.back());
    todo.pop_back();
    if (!n || !seen.insert(n.get()).second) continue;
    if (auto* acc = dynamic_cast<torch::autograd::AccumulateGrad*>(n.get())) leaves.push_back(acc->variable);
    for (const auto& e : n->next_edges()) todo.push_back(e.function);
  }
  return leaves;
}

// Learnable tensors outside the module tree: leaves of a training loss's graph (the recipe's own
// forward_train and training_loss on its last batch) that are not registered parameters. They get
// gradients, but no optimizer holds them and no state dict saves them. Empty: none found;
// nullopt: the probes are not provided. The run's buffers are put back as they were.
std::optional<std::vector<std::string>> unregistered_leaves(Run& run, const NamedTensors& params) {
  try {
    const auto [x, y] = run.last_batch();
    if (!x.defined()) return std::nullopt;
    const NamedTensors buffers = run.buffers();
    const NamedTensors buffers_before = snapshot(buffers);
    std::vector<at::Tensor> leaves;
    {
      const at::Tensor loss = run.training_loss(run.forward_train(x), y);
      leaves = graph_leaves(loss);
    }
    {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < buffers.size(); ++i) buffers[i].second.copy_(buffers_before[i].second);
    }
    std::set<const void*> registered;
    for (const auto& [n, p] : params) registered.insert(p.unsafeGetTensorImpl());
    std::vector<std::string> out;
    for (const at::Tensor& l : leaves) {
      if (registered.count(l.unsafeGetTensorImpl())) continue;
      std::ostringstream s;
      s << "a tensor of shape " << l.sizes() << " (" << c10::toString(l.scalar_type());
      if (l.numel() == 1) s << ", value " << l.item<double>();
      s << ")";
      out.push_back(s.str());
    }
    return out;
  } catch (const ProbeNotProvided&) {
    return std::nullopt;
  }
}

// Every registered parameter that requires a gradient gets one from the loss over one epoch (it
// shapes the output) and reaches the optimizer; frozen ones (requires_grad false) are counted, not
// required to; no tensor outside the registered ones takes a gradient in the loss. That each is
// saved shows in the round trip below.
void parameters_registered(Run& run, Findings& out) {
  NamedTensors params = run.parameters();
  std::vector<int> fired(params.size(), 0);
  HookSet hooks;
  int64_t frozen = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!hooks.add(params[i].second, [&fired, i](const at::Tensor&) { ++fired[i]; })) ++frozen;
  }
  for (int64_t i = 0; i < run.steps_per_epoch(); ++i) run.train_step();
  hooks.remove_all();
  out.metrics()["registered_parameters"] = params.size();
  out.metrics()["frozen_parameters"] = frozen;

  std::vector<std::string> problems;
  std::string dead;
  for (size_t i = 0; i < params.size(); ++i) {
    if (fired[i] == 0 && params[i].second.requires_grad()) dead += (dead.empty() ? "" : ", ") + params[i].first;
  }
  if (!dead.empty()) {
    problems.push_back("registered parameters that never receive a gradient (something else shapes the "
                       "output): " + dead);
  }
  std::set<const void*> optimised;
  for (const auto& group : optimizer_of(run)->optimizer_groups()) {
    for (const auto& p : group.params) optimised.insert(p.unsafeGetTensorImpl());
  }
  std::string missing;
  for (const auto& [name, p] : params) {
    if (p.requires_grad() && !optimised.count(p.unsafeGetTensorImpl())) missing += (missing.empty() ? "" : ", ") + name;
  }
  if (!missing.empty()) problems.push_back("registered parameters the optimizer does not update: " + missing);
  const auto outside = unregistered_leaves(run, params);
  if (outside && !outside->empty()) {
    std::string list;
    for (size_t i = 0; i < outside->size() && i < 4; ++i) list += (i ? "; " : "") + (*outside)[i];
    problems.push_back(std::to_string(outside->size()) + " tensor(s) that require a gradient take part in the "
                       "training loss (forward_train + training_loss on the last batch) but are not registered "
                       "parameters, so no optimizer or checkpoint of the module's state holds them: " + list);
  }
  if (!problems.empty()) {
    std::string ev;
    for (size_t i = 0; i < problems.size(); ++i) ev += (i ? "; " : "") + problems[i];
    out.broken("parameters_registered", ev);
  } else {
    out.held("parameters_registered",
             std::to_string(params.size() - frozen) + " parameters all receive gradients and are optimised" +
                 (frozen ? " (" + std::to_string(frozen) + " frozen, requires_grad false: not required to)" : "") +
                 (outside ? "; the training loss's graph has no learnable leaf outside them"
                          : "; leaves outside the registered parameters not looked for (forward_train, "
                            "training_loss or last_batch not provided)"));
  }
}

void eval_forwards_agree(const at::Tensor& y1, const at::Tensor& y2, Findings& out) {
  out.metrics()["eval_forwards_equal"] = torch::equal(y1, y2);
  if (!torch::equal(y1, y2)) {
    out.broken("eval_forwards_agree", "two eval forwards on one input differ (max |diff| " +
                                          fmt::sig(max_abs_diff(y1, y2), 3) +
                                          "): the output depends on weights made during forward");
  } else {
    out.held("eval_forwards_agree", "two eval forwards reproduce the outputs bitwise");
  }
}

// A state-dict round trip into a fresh model (other seed, so other initial weights) reproduces it.
void state_dict_round_trip(const CheckContext& ctx, Run& run, const at::Tensor& x, const at::Tensor& y1,
                           Findings& out) {
  Scratch scratch;
  run.save_checkpoint(scratch.file("state.pt"));
  std::unique_ptr<Run> fresh = fresh_run(ctx, run_options(ctx, ctx.seed + 1000));
  fresh->load_checkpoint(scratch.file("state.pt"));
  const at::Tensor y3 = fresh->predict(x).cpu();
  out.metrics()["round_trip_equal"] = torch::equal(y1, y3);
  if (!torch::equal(y1, y3)) {
    out.broken("state_dict_round_trip", "outputs after a state-dict round trip differ (max |diff| " +
                                            fmt::sig(max_abs_diff(y1, y3), 3) +
                                            "): the state dict misses what shapes the output");
  } else {
    out.held("state_dict_round_trip", "a state-dict round trip into a differently seeded model reproduces "
                                      "the outputs bitwise");
  }
}

CheckResult check_registration(const CheckContext& ctx) {
  std::unique_ptr<Run> run = fresh_run(ctx, run_options(ctx, ctx.seed));
  Findings f;
  parameters_registered(*run, f);
  const at::Tensor x = run->example_input(16);
  const at::Tensor y1 = run->predict(x).cpu(), y2 = run->predict(x).cpu();
  eval_forwards_agree(y1, y2, f);
  state_dict_round_trip(ctx, *run, x, y1, f);
  return f.result("after one epoch:");
}

}  // namespace
}  // namespace tc

namespace tc {
TC_CHECK(registration,
         "every parameter that shapes the output is registered, optimised and saved; a "
              "state-dict round trip reproduces outputs; two eval forwards agree")
    ->Promise("parameters_registered", "every parameter that shapes the output is registered, optimised and saved")
    ->Promise("state_dict_round_trip", "a state-dict round trip reproduces outputs")
    ->Promise("eval_forwards_agree", "two eval forwards agree");
}  // namespace tc
