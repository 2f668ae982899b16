// resume_equality: N steps straight == k steps + save + brand-new objects (global RNGs disturbed)
// + load + N-k steps, with k inside an epoch: losses, parameters and optimizer state bitwise equal.
// For a recipe that implements tc::AmpProbe, the same again with fp16 mixed precision: the
// GradScaler's scale and growth tracker (part of the optimizer state) must resume too; at the
// default scale 2^16 the first fp16 steps overflow and back the scale off, so a resume that
// forgets the scaler starts over at 2^16 and skips steps the straight run took.
#include <random>

#include <torch/torch.h>

#include "suites/support/fingerprint.h"
#include "suites/support/kit.h"
#include "suites/support/tensor_compare.h"
#include "harness/contract/amp_probe.h"

namespace tc {
namespace {

struct Scenario {
  std::vector<std::string> problems;
  std::string evaluation_problem;  // the evaluation after the last step differs ("" when equal)
  std::string evaluation_summary;
  nlohmann::json metrics;
  std::string summary;
  nlohmann::json fingerprint;  // of the straight run
};

// The scenario once; `amp`: with mixed precision (set through AmpProbe before every setup).
Scenario resume_scenario(const CheckContext& ctx, tc::AmpOptions* amp) {
  ScratchDir scratch;
  const std::string path = scratch.file("resume.pt");
  auto make = [&] {
    std::unique_ptr<Run> r = ctx.make_run();
    if (amp) dynamic_cast<tc::AmpProbe&>(*r).set_amp(*amp);
    r->setup(run_options(ctx, ctx.seed));
    return r;
  };

  std::unique_ptr<Run> straight = make();
  const int64_t spe = straight->steps_per_epoch();
  const int64_t k = spe + spe / 2;  // mid-way through the second epoch
  const int64_t n = 2 * spe + 2;    // and on across the next epoch boundary
  std::vector<double> expected, lr_expected;
  for (int64_t i = 0; i < n; ++i) {
    const StepRecord r = straight->train_step();
    expected.push_back(r.loss);
    lr_expected.push_back(r.lr);
  }
  const NamedTensors params_expected = snapshot(straight->parameters());
  const NamedTensors opt_expected = snapshot(straight->optimizer_state());
  // State only evaluation uses (averaged weights, a calibration buffer) shows here alone.
  const EvalResult eval_expected = straight->evaluate();
  straight.reset();
  Scenario o;
  o.fingerprint = training_fingerprint("the straight run of " + std::to_string(n) + " steps" + (amp ? " (fp16 autocast)" : ""),
                                       expected, params_expected);

  std::vector<double> resumed, lr_resumed;
  {
    std::unique_ptr<Run> first = make();
    for (int64_t i = 0; i < k; ++i) {
      const StepRecord r = first->train_step();
      resumed.push_back(r.loss);
      lr_resumed.push_back(r.lr);
    }
    first->save_checkpoint(path);
  }
  // Brand-new objects, as a new process would build them; then disturb the global generators
  // (other work done before the load), so that only what the checkpoint restores is restored.
  std::unique_ptr<Run> second = make();
  torch::manual_seed(std::random_device{}());
  (void)torch::rand({257});
  second->load_checkpoint(path);
  for (int64_t i = k; i < n; ++i) {
    const StepRecord r = second->train_step();
    resumed.push_back(r.loss);
    lr_resumed.push_back(r.lr);
  }
  const NamedTensors params_resumed = snapshot(second->parameters());
  const NamedTensors opt_resumed = snapshot(second->optimizer_state());
  const EvalResult eval_resumed = second->evaluate();

  nlohmann::json& m = o.metrics;
  m = {{"steps", n}, {"resume_at", k}, {"steps_per_epoch", spe},
       {"loss_curve_straight", expected}, {"loss_curve_resumed", resumed},
       {"optimizer_state_tensors", opt_expected.size()}};
  std::vector<std::string>& problems = o.problems;
  // The learning rate first: a schedule that did not resume explains every difference after it.
  if (auto lr = first_difference(lr_expected, lr_resumed)) {
    problems.push_back("the learning rate differs first, at step " + std::to_string(*lr) + ": " +
                       format_double(lr_expected[*lr], 9) + " straight, " + format_double(lr_resumed[*lr], 9) +
                       " resumed" + (static_cast<int64_t>(*lr) >= k ? " (the scheduler's position did not resume)" : ""));
  }
  auto curve = first_difference(expected, resumed);
  m["first_divergence_step"] = curve ? nlohmann::json(*curve) : nlohmann::json(nullptr);
  if (curve) problems.push_back("losses diverge at " + describe_curve_difference(expected, resumed, *curve));
  auto param = first_tensor_difference(params_expected, params_resumed);
  m["first_diverging_tensor"] = param ? nlohmann::json(param->name) : nlohmann::json(nullptr);
  m["max_abs_diff"] = param ? param->max_abs_diff : 0.0;
  if (param) {
    problems.push_back("parameter '" + param->name + "' differs (max |diff| " +
                       format_double(param->max_abs_diff, 3) + ")" + param->detail);
  }
  if (opt_expected.empty()) problems.push_back("the straight run has no optimizer state to compare");
  auto opt = first_tensor_difference(opt_expected, opt_resumed);
  if (opt) {
    problems.push_back("optimizer state '" + opt->name + "' differs (max |diff| " +
                       format_double(opt->max_abs_diff, 3) + ")" + opt->detail);
  }
  const at::Tensor le = eval_expected.logits.defined() ? eval_expected.logits.cpu() : at::Tensor();
  const at::Tensor lr_ = eval_resumed.logits.defined() ? eval_resumed.logits.cpu() : at::Tensor();
  const bool logits_equal = le.defined() == lr_.defined() && (!le.defined() || (le.sizes() == lr_.sizes() && torch::equal(le, lr_)));
  m["evaluation_equal"] = logits_equal && eval_expected.loss == eval_resumed.loss;
  if (!m["evaluation_equal"].get<bool>()) {
    o.evaluation_problem = "evaluate() after the last step: loss " + format_double(eval_expected.loss, 9) +
                           " straight, " + format_double(eval_resumed.loss, 9) + " resumed" +
                           (le.defined() && lr_.defined() && le.sizes() == lr_.sizes()
                                ? ", logits max |diff| " + format_double(max_abs_diff(le, lr_), 3)
                                : std::string(", logits of other shapes")) +
                           (problems.empty() ? " while losses, parameters and optimizer state were bitwise equal: "
                                               "state only evaluation uses did not resume"
                                             : "");
  }
  o.evaluation_summary = "evaluate() after " + std::to_string(n) + " steps straight and after the resume: loss " +
                         format_double(eval_expected.loss, 9) + " and " +
                         (le.defined() ? std::to_string(le.size(0)) + " logit rows" : std::string("no logits")) +
                         " bitwise equal";
  const std::string head = std::to_string(n) + " steps straight";
  o.summary = problems.empty()
                  ? head + " == " + std::to_string(k) + " steps + save + new objects + load + " +
                        std::to_string(n - k) + " (resumed at batch " + std::to_string(k - spe) +
                        " of epoch 1): losses, " + std::to_string(params_expected.size()) + " parameters and " +
                        std::to_string(opt_expected.size()) + " optimizer state tensors bitwise equal"
                  : head + " vs " + std::to_string(k) + " + save/load + " + std::to_string(n - k) + ":";
  return o;
}

std::string problems_text(const Scenario& s) {
  std::string t;
  for (size_t i = 0; i < s.problems.size(); ++i) t += (i ? "; " : " ") + s.problems[i];
  return t;
}

bool implements_amp(const CheckContext& ctx) {
  std::unique_ptr<Run> r = ctx.make_run();
  return dynamic_cast<tc::AmpProbe*>(r.get()) != nullptr;
}

// fp32: the plain resume. Returns whether it held.
bool resume_bitwise(const CheckContext& ctx, bool amp_next, Findings& out, nlohmann::json& fingerprint) {
  Scenario plain = resume_scenario(ctx, nullptr);
  out.metrics() = plain.metrics;
  fingerprint = plain.fingerprint;
  if (!plain.problems.empty()) {
    out.broken("resume_bitwise", plain.summary + problems_text(plain) +
                                     (amp_next ? " (the fp16 pass not run: the fp32 resume already differs)" : ""));
    return false;
  }
  out.held("resume_bitwise",
           plain.summary + (amp_next ? "" : "\n(no AMP pass: the recipe does not implement tc::AmpProbe)"));
  if (plain.evaluation_problem.empty()) {
    out.held("resume_evaluation", plain.evaluation_summary);
  } else {
    out.broken("resume_evaluation", plain.evaluation_problem);
  }
  return true;
}

// Again with mixed precision: fp16 autocast, the dtype a GradScaler exists for, so the scaler's
// scale and growth tracker are part of what must resume.
void resume_bitwise_amp(const CheckContext& ctx, Findings& out) {
  tc::AmpOptions amp;
  amp.dtype = c10::kHalf;
  Scenario mixed = resume_scenario(ctx, &amp);
  const std::string what = "with fp16 autocast + GradScaler: " + mixed.summary;
  if (!mixed.problems.empty()) {
    // The curves that diverged on top (the report draws loss_curve_straight/_resumed).
    nlohmann::json f = mixed.metrics;
    f["amp"] = "fp16";
    f["fp32_pass"] = out.metrics();
    out.metrics() = f;
    out.broken("resume_bitwise_amp", what + problems_text(mixed));
  } else {
    out.metrics()["amp_fp16"] = mixed.metrics;
    out.held("resume_bitwise_amp", what);
  }
}

CheckResult check_resume_equality(const CheckContext& ctx) {
  Findings f;
  const bool amp = implements_amp(ctx);
  nlohmann::json fingerprint;
  if (resume_bitwise(ctx, amp, f, fingerprint) && amp) resume_bitwise_amp(ctx, f);
  // What this environment computed, for `compare`: the fp32 straight run (the fp16 pass's metrics
  // may have been moved on top, the fingerprint stays that of fp32).
  f.metrics()["fingerprint"] = fingerprint;
  return f.result();
}

}  // namespace
}  // namespace tc

namespace tc {
TC_CHECK(resume_equality,
         "N steps straight equal k steps + save + fresh objects + load + N-k steps "
              "(k mid-epoch): losses, parameters, optimizer state bitwise")
    ->Promise("resume_bitwise", "N steps straight equal k steps + save + fresh objects + load + N-k steps (k mid-epoch): losses, parameters, optimizer state bitwise")
    ->Promise("resume_evaluation", "after the resume, evaluation equals the straight run's bitwise (state only "
                                   "evaluation uses resumes too)")
    ->Promise("resume_bitwise_amp", "the same with fp16 autocast + GradScaler, the scaler's scale and growth tracker "
                                    "included (recipes that implement tc::AmpProbe)");
}  // namespace tc
