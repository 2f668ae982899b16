// eval_mode: evaluating twice gives bitwise-equal outputs and metrics, BatchNorm running stats
// stay untouched, no autograd graph is built (observed inside the forward, not only on the returned
// logits), the next epoch trains in train mode again.
#include <ATen/record_function.h>
#include <torch/torch.h>

#include "harness/util/text_format.h"
#include "suites/support/fingerprint.h"
#include "suites/support/kit.h"
#include "suites/support/tensor_compare.h"

namespace tc {
namespace {

// What ran inside evaluate(): every operator the dispatcher called on the evaluating thread, and
// those called with grad mode on, outside inference mode, with an input that requires grad: each of those records autograd
// history, whatever the recipe later does with the outputs (a `.detach()` before returning hides the
// graph from the logits, not from the forward).
struct GraphWatch {
  int64_t ops = 0;
  int64_t graph_ops = 0;
  std::string first_graph_op;
};

thread_local GraphWatch* t_watch = nullptr;

bool requires_grad(const c10::IValue& v) {
  if (v.isTensor()) return v.toTensor().defined() && v.toTensor().requires_grad();
  if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector()) {
      if (t.defined() && t.requires_grad()) return true;
    }
  }
  return false;
}

std::unique_ptr<at::ObserverContext> on_operator(const at::RecordFunction& fn) {
  GraphWatch* w = t_watch;
  if (w == nullptr) return nullptr;
  ++w->ops;
  if (!at::GradMode::is_enabled() || c10::InferenceMode::is_enabled()) return nullptr;
  for (const c10::IValue& v : fn.inputs()) {
    if (requires_grad(v)) {
      if (w->graph_ops++ == 0) w->first_graph_op = fn.name();
      break;
    }
  }
  return nullptr;
}

// Watches the operators this thread dispatches while in scope (a thread-local RecordFunction
// callback, removed on exit).
class WatchOperators {
 public:
  explicit WatchOperators(GraphWatch& w)
      : handle_(at::addThreadLocalCallback(
            at::RecordFunctionCallback(on_operator).needsInputs(true).scopes({at::RecordScope::FUNCTION}))),
        enabled_(true) {
    t_watch = &w;
  }
  ~WatchOperators() {
    t_watch = nullptr;
    at::removeCallback(handle_);
  }
  WatchOperators(const WatchOperators&) = delete;
  WatchOperators& operator=(const WatchOperators&) = delete;

 private:
  at::CallbackHandle handle_;
  at::RecordFunctionGuard enabled_;
};

struct Evaluated {
  EvalResult e1, e2;
  NamedTensors params0, params1, buffers0, buffers1;
  GraphWatch watch;  // during the first evaluation
};

void eval_bitwise(const Evaluated& v, Findings& out) {
  const EvalResult& e1 = v.e1;
  const EvalResult& e2 = v.e2;
  const bool same_outputs = torch::equal(e1.logits.detach().cpu(), e2.logits.detach().cpu()) &&
                            std::memcmp(&e1.loss, &e2.loss, sizeof(double)) == 0 &&
                            e1.accuracy == e2.accuracy;
  out.metrics()["evaluations_equal"] = same_outputs;
  if (!same_outputs) {
    out.broken("eval_bitwise", "two evaluations differ: outputs max |diff| " +
                                   fmt::sig(max_abs_diff(e1.logits.detach(), e2.logits.detach()), 3) +
                                   (e1.has_accuracy ? ", accuracy " + fmt::sig(e1.accuracy) + " vs " + fmt::sig(e2.accuracy)
                                                    : ", loss " + fmt::sig(e1.loss, 9) + " vs " + fmt::sig(e2.loss, 9)));
  } else {
    out.held("eval_bitwise", "two evaluations bitwise equal (" +
                                 (e1.has_accuracy ? "accuracy " + fmt::sig(e1.accuracy) : "loss " + fmt::sig(e1.loss, 9)) + ")");
  }
}

// Evaluation leaves the model as it was: BatchNorm's running statistics (and the parameters).
void state_untouched(const Evaluated& v, Findings& out) {
  std::string problems;  // "; " between them (appended, not pushed into a vector of temporaries:
                         // GCC 12 warns -Wstringop-overflow, a false positive, on those moves)
  auto note = [&problems](const std::string& p) { problems += (problems.empty() ? "" : "; ") + p; };
  auto buf = first_tensor_difference(v.buffers0, v.buffers1);
  out.metrics()["buffers_untouched"] = !buf.has_value();
  if (buf) {
    note("evaluation changed buffer '" + buf->name + "' (max |diff| " + fmt::sig(buf->max_abs_diff, 3) +
         "): BatchNorm ran in training mode");
  }
  if (auto p = first_tensor_difference(v.params0, v.params1)) {
    note("evaluation changed parameter '" + p->name + "'");
  }
  if (!problems.empty()) {
    out.broken("bn_stats_untouched", problems);
  } else {
    out.held("bn_stats_untouched", std::to_string(v.buffers0.size()) + " buffers and " +
                                       std::to_string(v.params0.size()) + " parameters untouched");
  }
}

// Judged inside the forward (operators run with grad mode on an input requiring grad) and on the
// returned logits.
void no_autograd_graph(const Evaluated& v, Findings& out) {
  const at::Tensor& logits = v.e1.logits;
  const GraphWatch& w = v.watch;
  const bool logits_graph = logits.requires_grad() || logits.grad_fn() != nullptr;
  out.metrics()["autograd_graph_built"] = logits_graph || w.graph_ops > 0;
  out.metrics()["eval_operators"] = w.ops;
  out.metrics()["eval_operators_recording_grad"] = w.graph_ops;
  std::string problems;  // "; " between them, as in state_untouched
  auto note = [&problems](const std::string& p) { problems += (problems.empty() ? "" : "; ") + p; };
  if (w.graph_ops > 0) {
    note("evaluation ran " + std::to_string(w.graph_ops) + " of its " + std::to_string(w.ops) +
         " operators with grad mode on and an input that requires grad (first: " + w.first_graph_op +
         "): every forward records an autograd graph; evaluate under torch::NoGradGuard or torch::InferenceMode");
  }
  if (logits_graph) {
    note(std::string("logits have grad_fn ") + (logits.grad_fn() ? logits.grad_fn()->name() : "none") +
         " (requires_grad=" + (logits.requires_grad() ? "true" : "false") + ")");
  }
  if (!problems.empty()) {
    out.broken("no_autograd_graph", "evaluation built an autograd graph: " + problems);
  } else if (w.ops == 0) {
    // Nothing ran on the evaluating thread: the forward ran elsewhere, out of this watch's sight.
    out.recorded("no_autograd_graph", "no operator ran on the thread that called evaluate(): grad mode inside "
                                      "the forward not observed; the logits carry no graph");
  } else {
    out.held("no_autograd_graph", "no autograd graph: none of the " + std::to_string(w.ops) +
                                      " operators evaluation ran had grad mode on with an input requiring grad, "
                                      "and the logits carry none");
  }
}

// Normalisation layers' running statistics (BatchNorm's, InstanceNorm's with tracking), by
// PyTorch's buffer names: they move only in training mode. Other buffers (a fixed positional
// table, a mask) never move and say nothing about the mode.
NamedTensors running_statistics(const NamedTensors& buffers) {
  auto ends_with = [](const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  NamedTensors out;
  for (const auto& [name, t] : buffers) {
    if (ends_with(name, "running_mean") || ends_with(name, "running_var")) out.emplace_back(name, t);
  }
  return out;
}

// The next epoch must train in train mode: the recipe says so, and the running statistics of its
// normalisation layers move (they only do in training mode), where it has any and they moved in the
// first epoch.
//
// The statistics are evidence only where they moved in the first epoch, before any evaluation: a
// recipe that keeps its BatchNorm frozen (in eval mode while training, as fine-tuning does) moves
// none in either epoch, and that says nothing about the mode the model was put back in.
void train_mode_restored(Run& run, std::vector<double>& losses, bool stats_moved_before, Findings& out) {
  const int64_t spe = run.steps_per_epoch();
  const NamedTensors before_epoch = snapshot(running_statistics(run.buffers()));
  int64_t eval_mode_steps = 0;
  for (int64_t i = 0; i < spe; ++i) {
    const StepRecord r = run.train_step();
    losses.push_back(r.loss);
    if (!r.training_mode) ++eval_mode_steps;
  }
  const bool has_stats = !before_epoch.empty() && stats_moved_before;
  const bool stats_moved =
      has_stats && first_tensor_difference(before_epoch, snapshot(running_statistics(run.buffers()))).has_value();
  out.metrics()["next_epoch_eval_mode_steps"] = eval_mode_steps;
  out.metrics()["next_epoch_running_stats_moved"] = has_stats ? nlohmann::json(stats_moved) : nlohmann::json(nullptr);
  if (eval_mode_steps > 0 || (has_stats && !stats_moved)) {
    out.broken("train_mode_restored", "the epoch after evaluation trained in eval mode: " +
                                          std::to_string(eval_mode_steps) + " of " + std::to_string(spe) +
                                          " steps had model.is_training() false; " +
                                          (has_stats ? std::string("BatchNorm running stats ") +
                                                           (stats_moved ? "moved" : "did not move")
                                                     : std::string("the model has no running statistics")));
  } else if (has_stats) {
    out.held("train_mode_restored", "next epoch trained in train mode with BatchNorm stats moving");
  } else if (!before_epoch.empty()) {
    out.held("train_mode_restored", "next epoch trained in train mode (every step's training_mode; the running "
                                    "statistics moved in neither epoch, BatchNorm kept frozen by the recipe, so "
                                    "they say nothing about the mode)");
  } else {
    out.held("train_mode_restored", "next epoch trained in train mode (every step's training_mode; the model "
                                    "has no running statistics, so none could be seen moving)");
  }
}

CheckResult check_eval_mode(const CheckContext& ctx) {
  std::unique_ptr<Run> run = fresh_run(ctx, run_options(ctx, ctx.seed));
  std::vector<double> losses;
  const NamedTensors stats0 = snapshot(running_statistics(run->buffers()));
  for (int64_t i = 0; i < run->steps_per_epoch(); ++i) losses.push_back(run->train_step().loss);  // one epoch
  const bool stats_moved_before =
      first_tensor_difference(stats0, snapshot(running_statistics(run->buffers()))).has_value();

  Evaluated v;
  v.params0 = snapshot(run->parameters());
  v.buffers0 = snapshot(run->buffers());
  {
    WatchOperators watching(v.watch);
    v.e1 = run->evaluate();
  }
  v.e2 = run->evaluate();
  v.params1 = snapshot(run->parameters());
  v.buffers1 = snapshot(run->buffers());

  Findings f;
  // A task without accuracy (a regression, a language model) records none, not a 0.
  const auto accuracy = [](const EvalResult& e) { return e.has_accuracy ? nlohmann::json(e.accuracy) : nlohmann::json(nullptr); };
  f.metrics() = {{"eval_accuracy_1", accuracy(v.e1)}, {"eval_accuracy_2", accuracy(v.e2)},
                 {"eval_loss_1", v.e1.loss}, {"eval_loss_2", v.e2.loss}};
  eval_bitwise(v, f);
  state_untouched(v, f);
  no_autograd_graph(v, f);
  train_mode_restored(*run, losses, stats_moved_before, f);
  // What this environment computed, for `compare`: both epochs, the evaluations between them.
  f.metrics()["fingerprint"] = training_fingerprint(
      "one epoch, two evaluations, one more epoch (" + std::to_string(losses.size()) + " steps, seed " +
          std::to_string(ctx.seed) + ")",
      losses, run->parameters());
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
