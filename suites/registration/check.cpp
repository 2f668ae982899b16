// registration: every parameter that shapes the output is registered, reaches the optimizer and is
// saved; a state-dict round trip into a differently-seeded fresh model reproduces the outputs
// bitwise; two eval forwards agree.
#include <set>

#include <torch/torch.h>

#include "suites/support/kit.h"
#include "suites/support/tensor_compare.h"

namespace tc {
namespace {

// Every registered parameter gets a gradient from the loss over one epoch (it shapes the output)
// and reaches the optimizer; that each is saved shows in the round trip below.
void parameters_registered(Run& run, Findings& out) {
  NamedTensors params = run.parameters();
  std::vector<int> fired(params.size(), 0);
  std::vector<unsigned> hooks;
  for (size_t i = 0; i < params.size(); ++i) {
    hooks.push_back(params[i].second.register_hook([&fired, i](const at::Tensor&) { ++fired[i]; }));
  }
  for (int64_t i = 0; i < run.steps_per_epoch(); ++i) run.train_step();
  for (size_t i = 0; i < params.size(); ++i) params[i].second.remove_hook(hooks[i]);
  out.metrics()["registered_parameters"] = params.size();

  std::vector<std::string> problems;
  std::string dead;
  for (size_t i = 0; i < params.size(); ++i) {
    if (fired[i] == 0) dead += (dead.empty() ? "" : ", ") + params[i].first;
  }
  if (!dead.empty()) {
    problems.push_back("registered parameters that never receive a gradient (something else shapes the "
                       "output): " + dead);
  }
  std::set<const void*> optimised;
  for (const auto& group : run.optimizer().param_groups()) {
    for (const auto& p : group.params()) optimised.insert(p.unsafeGetTensorImpl());
  }
  std::string missing;
  for (const auto& [name, p] : params) {
    if (!optimised.count(p.unsafeGetTensorImpl())) missing += (missing.empty() ? "" : ", ") + name;
  }
  if (!missing.empty()) problems.push_back("registered parameters the optimizer does not update: " + missing);
  if (!problems.empty()) {
    std::string ev;
    for (size_t i = 0; i < problems.size(); ++i) ev += (i ? "; " : "") + problems[i];
    out.broken("parameters_registered", ev);
  } else {
    out.held("parameters_registered",
             std::to_string(params.size()) + " parameters all receive gradients and are optimised");
  }
}

void eval_forwards_agree(const at::Tensor& y1, const at::Tensor& y2, Findings& out) {
  out.metrics()["eval_forwards_equal"] = torch::equal(y1, y2);
  if (!torch::equal(y1, y2)) {
    out.broken("eval_forwards_agree", "two eval forwards on one input differ (max |diff| " +
                                          format_double(max_abs_diff(y1, y2), 3) +
                                          "): the output depends on weights made during forward");
  } else {
    out.held("eval_forwards_agree", "two eval forwards reproduce the outputs bitwise");
  }
}

// A state-dict round trip into a fresh model (other seed, so other initial weights) reproduces it.
void state_dict_round_trip(const CheckContext& ctx, Run& run, const at::Tensor& x, const at::Tensor& y1,
                           Findings& out) {
  ScratchDir scratch;
  run.save_checkpoint(scratch.file("state.pt"));
  std::unique_ptr<Run> fresh = ctx.make_run();
  fresh->setup(run_options(ctx, ctx.seed + 1000));
  fresh->load_checkpoint(scratch.file("state.pt"));
  const at::Tensor y3 = fresh->predict(x).cpu();
  out.metrics()["round_trip_equal"] = torch::equal(y1, y3);
  if (!torch::equal(y1, y3)) {
    out.broken("state_dict_round_trip", "outputs after a state-dict round trip differ (max |diff| " +
                                            format_double(max_abs_diff(y1, y3), 3) +
                                            "): the state dict misses what shapes the output");
  } else {
    out.held("state_dict_round_trip", "a state-dict round trip into a differently seeded model reproduces "
                                      "the outputs bitwise");
  }
}

CheckResult check_registration(const CheckContext& ctx) {
  std::unique_ptr<Run> run = ctx.make_run();
  run->setup(run_options(ctx, ctx.seed));
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
