// eval_mode: evaluating twice gives bitwise-equal outputs and metrics, BatchNorm running stats
// stay untouched, no autograd graph is built, the next epoch trains in train mode again.
#include <torch/torch.h>

#include "suites/support/kit.h"
#include "suites/support/tensor_compare.h"

namespace tc {
namespace {

struct Evaluated {
  EvalResult e1, e2;
  NamedTensors params0, params1, buffers0, buffers1;
};

void eval_bitwise(const Evaluated& v, Findings& out) {
  const EvalResult& e1 = v.e1;
  const EvalResult& e2 = v.e2;
  const bool same_outputs = torch::equal(e1.logits.detach().cpu(), e2.logits.detach().cpu()) &&
                            std::memcmp(&e1.loss, &e2.loss, sizeof(double)) == 0 &&
                            e1.accuracy == e2.accuracy;
  out.metrics()["evaluations_equal"] = same_outputs;
  if (!same_outputs) {
    out.broken("eval_bitwise", "two evaluations differ: logits max |diff| " +
                                   format_double(max_abs_diff(e1.logits.detach(), e2.logits.detach()), 3) +
                                   ", accuracy " + format_double(e1.accuracy) + " vs " + format_double(e2.accuracy));
  } else {
    out.held("eval_bitwise", "two evaluations bitwise equal (accuracy " + format_double(e1.accuracy) + ")");
  }
}

// Evaluation leaves the model as it was: BatchNorm's running statistics (and the parameters).
void state_untouched(const Evaluated& v, Findings& out) {
  std::vector<std::string> problems;
  auto buf = first_tensor_difference(v.buffers0, v.buffers1);
  out.metrics()["buffers_untouched"] = !buf.has_value();
  if (buf) {
    problems.push_back("evaluation changed buffer '" + buf->name + "' (max |diff| " +
                       format_double(buf->max_abs_diff, 3) + "): BatchNorm ran in training mode");
  }
  if (auto p = first_tensor_difference(v.params0, v.params1)) {
    problems.push_back("evaluation changed parameter '" + p->name + "'");
  }
  if (!problems.empty()) {
    std::string ev;
    for (size_t i = 0; i < problems.size(); ++i) ev += (i ? "; " : "") + problems[i];
    out.broken("bn_stats_untouched", ev);
  } else {
    out.held("bn_stats_untouched", std::to_string(v.buffers0.size()) + " buffers and " +
                                       std::to_string(v.params0.size()) + " parameters untouched");
  }
}

void no_autograd_graph(const Evaluated& v, Findings& out) {
  const at::Tensor& logits = v.e1.logits;
  const bool graph = logits.requires_grad() || logits.grad_fn() != nullptr;
  out.metrics()["autograd_graph_built"] = graph;
  if (graph) {
    out.broken("no_autograd_graph", std::string("evaluation built an autograd graph: logits have grad_fn ") +
                                        (logits.grad_fn() ? logits.grad_fn()->name() : "none") +
                                        " (requires_grad=" + (logits.requires_grad() ? "true" : "false") + ")");
  } else {
    out.held("no_autograd_graph", "no autograd graph");
  }
}

// The next epoch must train in train mode: the recipe says so, and BatchNorm's running
// statistics move (they only do in training mode).
void train_mode_restored(Run& run, Findings& out) {
  const int64_t spe = run.steps_per_epoch();
  const NamedTensors before_epoch = snapshot(run.buffers());
  int64_t eval_mode_steps = 0;
  for (int64_t i = 0; i < spe; ++i) {
    if (!run.train_step().training_mode) ++eval_mode_steps;
  }
  const bool stats_moved = first_tensor_difference(before_epoch, snapshot(run.buffers())).has_value();
  out.metrics()["next_epoch_eval_mode_steps"] = eval_mode_steps;
  out.metrics()["next_epoch_running_stats_moved"] = stats_moved;
  if (eval_mode_steps > 0 || !stats_moved) {
    out.broken("train_mode_restored", "the epoch after evaluation trained in eval mode: " +
                                          std::to_string(eval_mode_steps) + " of " + std::to_string(spe) +
                                          " steps had model.is_training() false; BatchNorm running stats " +
                                          (stats_moved ? "moved" : "did not move"));
  } else {
    out.held("train_mode_restored", "next epoch trained in train mode with BatchNorm stats moving");
  }
}

CheckResult check_eval_mode(const CheckContext& ctx) {
  std::unique_ptr<Run> run = ctx.make_run();
  run->setup(run_options(ctx, ctx.seed));
  for (int64_t i = 0; i < run->steps_per_epoch(); ++i) run->train_step();  // one epoch

  Evaluated v;
  v.params0 = snapshot(run->parameters());
  v.buffers0 = snapshot(run->buffers());
  v.e1 = run->evaluate();
  v.e2 = run->evaluate();
  v.params1 = snapshot(run->parameters());
  v.buffers1 = snapshot(run->buffers());

  Findings f;
  f.metrics() = {{"eval_accuracy_1", v.e1.accuracy}, {"eval_accuracy_2", v.e2.accuracy},
                 {"eval_loss_1", v.e1.loss}, {"eval_loss_2", v.e2.loss}};
  eval_bitwise(v, f);
  state_untouched(v, f);
  no_autograd_graph(v, f);
  train_mode_restored(*run, f);
  return f.result("evaluation after one epoch:");
}

}  // namespace
}  // namespace tc

namespace tc {
TC_CHECK(eval_mode,
         "eval twice gives bitwise-equal outputs; BatchNorm stats untouched; no autograd "
              "graph; the next epoch trains in train mode")
    ->Promise("eval_bitwise", "eval twice gives bitwise-equal outputs")
    ->Promise("bn_stats_untouched", "BatchNorm running statistics (and parameters) untouched by eval")
    ->Promise("no_autograd_graph", "eval builds no autograd graph")
    ->Promise("train_mode_restored", "the next epoch trains in train mode");
}  // namespace tc
