// registration: every parameter that shapes the output is registered, reaches the optimizer and is
// saved; a state-dict round trip into a differently-seeded fresh model reproduces the outputs
// bitwise; two eval forwards agree.
#include <set>

#include <torch/torch.h>

#include "suites/support/tensor_compare.h"

namespace tc {
namespace {

CheckResult check_registration(const CheckContext& ctx) {
  ScratchDir scratch;
  std::unique_ptr<Run> run = ctx.make_run();
  run->setup(run_options(ctx, ctx.seed));

  // Every registered parameter gets a gradient from the loss (it shapes the output).
  NamedTensors params = run->parameters();
  std::vector<int> fired(params.size(), 0);
  std::vector<unsigned> hooks;
  for (size_t i = 0; i < params.size(); ++i) {
    hooks.push_back(params[i].second.register_hook([&fired, i](const at::Tensor&) { ++fired[i]; }));
  }
  for (int64_t i = 0; i < run->steps_per_epoch(); ++i) run->train_step();
  for (size_t i = 0; i < params.size(); ++i) params[i].second.remove_hook(hooks[i]);

  std::vector<std::string> problems;
  nlohmann::json m = {{"registered_parameters", params.size()}};
  std::string dead;
  for (size_t i = 0; i < params.size(); ++i) {
    if (fired[i] == 0) dead += (dead.empty() ? "" : ", ") + params[i].first;
  }
  if (!dead.empty()) {
    problems.push_back("registered parameters that never receive a gradient (something else shapes the "
                       "output): " + dead);
  }

  // Every registered parameter reaches the optimizer.
  std::set<const void*> optimised;
  for (const auto& group : run->optimizer().param_groups()) {
    for (const auto& p : group.params()) optimised.insert(p.unsafeGetTensorImpl());
  }
  std::string missing;
  for (const auto& [name, p] : params) {
    if (!optimised.count(p.unsafeGetTensorImpl())) missing += (missing.empty() ? "" : ", ") + name;
  }
  if (!missing.empty()) problems.push_back("registered parameters the optimizer does not update: " + missing);

  // Two eval forwards agree.
  const at::Tensor x = run->example_input(16);
  const at::Tensor y1 = run->predict(x).cpu(), y2 = run->predict(x).cpu();
  m["eval_forwards_equal"] = torch::equal(y1, y2);
  if (!torch::equal(y1, y2)) {
    problems.push_back("two eval forwards on one input differ (max |diff| " +
                       format_double(max_abs_diff(y1, y2), 3) +
                       "): the output depends on weights made during forward");
  }

  // A state-dict round trip into a fresh model (other seed, so other initial weights) reproduces it.
  run->save_checkpoint(scratch.file("state.pt"));
  std::unique_ptr<Run> fresh = ctx.make_run();
  fresh->setup(run_options(ctx, ctx.seed + 1000));
  fresh->load_checkpoint(scratch.file("state.pt"));
  const at::Tensor y3 = fresh->predict(x).cpu();
  m["round_trip_equal"] = torch::equal(y1, y3);
  if (!torch::equal(y1, y3)) {
    problems.push_back("outputs after a state-dict round trip differ (max |diff| " +
                       format_double(max_abs_diff(y1, y3), 3) + "): the state dict misses what shapes the output");
  }

  if (!problems.empty()) {
    std::string ev = "after one epoch:";
    for (const auto& p : problems) ev += "\n- " + p;
    return CheckResult::fail(ev, m);
  }
  return CheckResult::pass(std::to_string(params.size()) +
                               " parameters all receive gradients and are optimised; two eval "
                               "forwards and a state-dict round trip reproduce the outputs bitwise",
                           m);
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
