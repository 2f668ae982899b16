// eval_mode: evaluating twice gives bitwise-equal outputs and metrics, BatchNorm running stats
// stay untouched, no autograd graph is built, the next epoch trains in train mode again.
#include <torch/torch.h>

#include "suites/support/tensor_compare.h"

namespace tc {
namespace {

CheckResult check_eval_mode(const CheckContext& ctx) {
  std::unique_ptr<Run> run = ctx.make_run();
  run->setup(run_options(ctx, ctx.seed));
  const int64_t spe = run->steps_per_epoch();
  for (int64_t i = 0; i < spe; ++i) run->train_step();  // one epoch

  const NamedTensors params0 = snapshot(run->parameters());
  const NamedTensors buffers0 = snapshot(run->buffers());
  EvalResult e1 = run->evaluate();
  EvalResult e2 = run->evaluate();
  const NamedTensors params1 = snapshot(run->parameters());
  const NamedTensors buffers1 = snapshot(run->buffers());

  std::vector<std::string> problems;
  nlohmann::json m = {{"eval_accuracy_1", e1.accuracy}, {"eval_accuracy_2", e2.accuracy},
                      {"eval_loss_1", e1.loss}, {"eval_loss_2", e2.loss}};

  const bool same_outputs = torch::equal(e1.logits.detach().cpu(), e2.logits.detach().cpu()) &&
                            std::memcmp(&e1.loss, &e2.loss, sizeof(double)) == 0 &&
                            e1.accuracy == e2.accuracy;
  m["evaluations_equal"] = same_outputs;
  if (!same_outputs) {
    problems.push_back("two evaluations differ: logits max |diff| " +
                       format_double(max_abs_diff(e1.logits.detach(), e2.logits.detach()), 3) +
                       ", accuracy " + format_double(e1.accuracy) + " vs " + format_double(e2.accuracy));
  }
  auto buf = first_tensor_difference(buffers0, buffers1);
  m["buffers_untouched"] = !buf.has_value();
  if (buf) {
    problems.push_back("evaluation changed buffer '" + buf->name + "' (max |diff| " +
                       format_double(buf->max_abs_diff, 3) + "): BatchNorm ran in training mode");
  }
  if (auto p = first_tensor_difference(params0, params1)) {
    problems.push_back("evaluation changed parameter '" + p->name + "'");
  }
  const bool graph = e1.logits.requires_grad() || e1.logits.grad_fn() != nullptr;
  m["autograd_graph_built"] = graph;
  if (graph) {
    problems.push_back(std::string("evaluation built an autograd graph: logits have grad_fn ") +
                       (e1.logits.grad_fn() ? e1.logits.grad_fn()->name() : "none") +
                       " (requires_grad=" + (e1.logits.requires_grad() ? "true" : "false") + ")");
  }

  // The next epoch must train in train mode: the recipe says so, and BatchNorm's running
  // statistics move (they only do in training mode).
  const NamedTensors before_epoch = snapshot(run->buffers());
  int64_t eval_mode_steps = 0;
  for (int64_t i = 0; i < spe; ++i) {
    if (!run->train_step().training_mode) ++eval_mode_steps;
  }
  const bool stats_moved = first_tensor_difference(before_epoch, snapshot(run->buffers())).has_value();
  m["next_epoch_eval_mode_steps"] = eval_mode_steps;
  m["next_epoch_running_stats_moved"] = stats_moved;
  if (eval_mode_steps > 0 || !stats_moved) {
    problems.push_back("the epoch after evaluation trained in eval mode: " + std::to_string(eval_mode_steps) +
                       " of " + std::to_string(spe) + " steps had model.is_training() false; BatchNorm "
                       "running stats " + (stats_moved ? "moved" : "did not move"));
  }

  if (!problems.empty()) {
    std::string ev = "evaluation after one epoch:";
    for (const auto& p : problems) ev += "\n- " + p;
    return CheckResult::fail(ev, m);
  }
  return CheckResult::pass("two evaluations bitwise equal (accuracy " + format_double(e1.accuracy) +
                               "), " + std::to_string(buffers0.size()) +
                               " buffers untouched, no autograd graph, next epoch trained in train "
                               "mode with BatchNorm stats moving",
                           m);
}

}  // namespace
}  // namespace tc

namespace tc {
TC_CHECK(eval_mode,
         "eval twice gives bitwise-equal outputs; BatchNorm stats untouched; no autograd "
              "graph; the next epoch trains in train mode")
    ->Promise("eval_bitwise", "eval twice gives bitwise-equal outputs")
    ->Promise("bn_stats_untouched", "BatchNorm running statistics untouched by eval")
    ->Promise("no_autograd_graph", "eval builds no autograd graph")
    ->Promise("train_mode_restored", "the next epoch trains in train mode");
}  // namespace tc
