// resume_equality: N steps straight == k steps + save + brand-new objects (global RNGs disturbed)
// + load + N-k steps, with k inside an epoch: losses, parameters and optimizer state bitwise equal.
// For a recipe that implements tc::AmpProbe, the same again with fp16 mixed precision: the
// GradScaler's scale and growth tracker (part of the optimizer state) must resume too; at the
// default scale 2^16 the first fp16 steps overflow and back the scale off, so a resume that
// forgets the scaler starts over at 2^16 and skips steps the straight run took.
#include <random>

#include <torch/torch.h>

#include "harness/contract/amp_probe.h"
#include "harness/contract/scratch.h"
#include "harness/util/text_format.h"
#include "suites/support/fingerprint.h"
#include "suites/support/kit.h"
#include "suites/support/tensor_compare.h"

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

// One run's path: its losses and learning rates, step by step, and where it ended.
struct Path {
  std::vector<double> losses, lrs;
  NamedTensors params, opt;
  EvalResult eval;
};

void train(Run& r, int64_t from, int64_t to, Path& p) {
  for (int64_t i = from; i < to; ++i) {
    const StepRecord s = r.train_step();
    p.losses.push_back(s.loss);
    p.lrs.push_back(s.lr);
  }
}

// Where it ended, evaluation included: state only evaluation uses (averaged weights, a calibration
// buffer) shows there alone.
void finish(Run& r, Path& p) {
  p.params = snapshot(r.parameters());
  p.opt = snapshot(r.optimizer_state());
  p.eval = r.evaluate();
}

// The training state compared: the learning rate first (a schedule that did not resume explains
// every difference after it), losses, parameters, optimizer state.
void compare_state(const Path& want, const Path& got, int64_t k, Scenario& o) {
  nlohmann::json& m = o.metrics;
  std::vector<std::string>& problems = o.problems;
  if (auto lr = first_difference(want.lrs, got.lrs)) {
    problems.push_back("the learning rate differs first, at step " + std::to_string(*lr) + ": " +
                       fmt::sig(want.lrs[*lr], 9) + " straight, " + fmt::sig(got.lrs[*lr], 9) +
                       " resumed" + (static_cast<int64_t>(*lr) >= k ? " (the scheduler's position did not resume)" : ""));
  }
  auto curve = first_difference(want.losses, got.losses);
  m["first_divergence_step"] = curve ? nlohmann::json(*curve) : nlohmann::json(nullptr);
  if (curve) problems.push_back("losses diverge at " + describe_curve_difference(want.losses, got.losses, *curve));
  auto param = first_tensor_difference(want.params, got.params);
  m["first_diverging_tensor"] = param ? nlohmann::json(param->name) : nlohmann::json(nullptr);
  m["max_abs_diff"] = param ? param->max_abs_diff : 0.0;
  if (param) {
    problems.push_back("parameter '" + param->name + "' differs (max |diff| " +
                       fmt::sig(param->max_abs_diff, 3) + ")" + param->detail);
  }
  // An optimizer without state (SGD without momentum) leaves nothing to compare there: not a fault
  // (the evidence counts the state tensors compared, 0 for it).
  if (auto opt = first_tensor_difference(want.opt, got.opt)) {
    problems.push_back("optimizer state '" + opt->name + "' differs (max |diff| " +
                       fmt::sig(opt->max_abs_diff, 3) + ")" + opt->detail);
  }
}

// Right after the load, the new objects hold what the saving run held when it saved: a state the
// checkpoint left out can heal before the last step (a GradScaler's growth tracker that an overflow
// at the first step after the resume resets in both runs: gen-120159-no_scaler_state resumed
// bitwise to the end), so the end alone does not show it. Bitwise by nature: the same data.
void compare_loaded(const Path& saved, const Path& loaded, int64_t k, Scenario& o) {
  if (!o.problems.empty()) return;  // a difference at the end already says the resume lost state
  const std::string at = "right after the load at step " + std::to_string(k) + ", ";
  if (auto param = first_tensor_difference(saved.params, loaded.params)) {
    o.problems.push_back(at + "parameter '" + param->name + "' differs from the saving run's (max |diff| " +
                         fmt::sig(param->max_abs_diff, 3) + ")" + param->detail);
  } else if (auto opt = first_tensor_difference(saved.opt, loaded.opt)) {
    o.problems.push_back(at + "optimizer state '" + opt->name + "' differs from the saving run's (max |diff| " +
                         fmt::sig(opt->max_abs_diff, 3) + ")" + opt->detail +
                         ": the checkpoint did not carry it (equal again by the last step)");
  }
}

// The evaluations after the last step compared, bitwise (loss and logits).
void compare_evaluation(const Path& want, const Path& got, int64_t n, Scenario& o) {
  const at::Tensor a = want.eval.logits.defined() ? want.eval.logits.cpu() : at::Tensor();
  const at::Tensor b = got.eval.logits.defined() ? got.eval.logits.cpu() : at::Tensor();
  const bool same_shape = a.defined() && b.defined() && a.sizes() == b.sizes();
  const bool logits_equal = a.defined() == b.defined() && (!a.defined() || (same_shape && torch::equal(a, b)));
  o.metrics["evaluation_equal"] = logits_equal && want.eval.loss == got.eval.loss;
  if (!o.metrics["evaluation_equal"].get<bool>()) {
    o.evaluation_problem = "evaluate() after the last step: loss " + fmt::sig(want.eval.loss, 9) +
                           " straight, " + fmt::sig(got.eval.loss, 9) + " resumed" +
                           (same_shape ? ", logits max |diff| " + fmt::sig(max_abs_diff(a, b), 3)
                                       : std::string(", logits of other shapes")) +
                           (o.problems.empty() ? " while losses, parameters and optimizer state were bitwise equal: "
                                                 "state only evaluation uses did not resume"
                                               : "");
  }
  o.evaluation_summary = "evaluate() after " + std::to_string(n) + " steps straight and after the resume: loss " +
                         fmt::sig(want.eval.loss, 9) + " and " +
                         (a.defined() ? std::to_string(a.size(0)) + " logit rows" : std::string("no logits")) +
                         " bitwise equal";
}

// Where the resumed run is saved and loaded: in the second epoch, at or before its middle, and a
// prime step, so that a schedule counted from 0 again after the load (a scheduler whose state the
// checkpoint lost) decays at other steps than the straight run for every period below it. At the
// middle itself, 9 steps with 6 per epoch, a StepLR of step_size 3 restarted at 0 decays at 12 in
// both runs and the lost state does not show (found by the Python variant py_no_scheduler_state).
int64_t resume_step(int64_t spe) {
  auto prime = [](int64_t v) {
    for (int64_t d = 2; d * d <= v; ++d) {
      if (v % d == 0) return false;
    }
    return v >= 2;
  };
  for (int64_t k = spe + spe / 2; k > spe; --k) {
    if (prime(k)) return k;
  }
  return spe + spe / 2;  // one step per epoch: no prime in between
}

// The scenario once; `amp`: with mixed precision (set through AmpProbe before every setup).
Scenario resume_scenario(const CheckContext& ctx, tc::AmpOptions* amp) {
  Scratch scratch;
  const std::string path = scratch.file("resume.pt");
  auto make = [&] {
    std::unique_ptr<Run> r = ctx.make_run();
    if (amp) dynamic_cast<tc::AmpProbe&>(*r).set_amp(*amp);
    r->setup(run_options(ctx, ctx.seed));
    return r;
  };
  Path straight, resumed, saved, loaded;
  int64_t spe = 0, k = 0, n = 0;
  {
    std::unique_ptr<Run> r = make();
    spe = r->steps_per_epoch();
    k = resume_step(spe);  // in the second epoch, a prime step
    n = 2 * spe + 2;    // and on across the next epoch boundary
    train(*r, 0, n, straight);
    finish(*r, straight);
  }
  {
    std::unique_ptr<Run> first = make();
    train(*first, 0, k, resumed);
    first->save_checkpoint(path);
    saved.params = snapshot(first->parameters());
    saved.opt = snapshot(first->optimizer_state());
  }
  // Brand-new objects, as a new process would build them; then disturb the global generators
  // (other work done before the load), so that only what the checkpoint restores is restored.
  std::unique_ptr<Run> second = make();
  torch::manual_seed(std::random_device{}());
  (void)torch::rand({257});
  second->load_checkpoint(path);
  loaded.params = snapshot(second->parameters());
  loaded.opt = snapshot(second->optimizer_state());
  train(*second, k, n, resumed);
  finish(*second, resumed);

  Scenario o;
  o.fingerprint = training_fingerprint("the straight run of " + std::to_string(n) + " steps" + (amp ? " (fp16 autocast)" : ""),
                                       straight.losses, straight.params);
  o.metrics = {{"steps", n}, {"resume_at", k}, {"steps_per_epoch", spe},
               {"loss_curve_straight", straight.losses}, {"loss_curve_resumed", resumed.losses},
               {"optimizer_state_tensors", straight.opt.size()}};
  compare_state(straight, resumed, k, o);
  compare_loaded(saved, loaded, k, o);
  compare_evaluation(straight, resumed, n, o);
  const std::string head = std::to_string(n) + " steps straight";
  o.summary = o.problems.empty()
                  ? head + " == " + std::to_string(k) + " steps + save + new objects + load + " +
                        std::to_string(n - k) + " (resumed at batch " + std::to_string(k - spe) +
                        " of epoch 1): losses, " + std::to_string(straight.params.size()) + " parameters and " +
                        std::to_string(straight.opt.size()) + " optimizer state tensors bitwise equal"
                  : head + " vs " + std::to_string(k) + " + save/load + " + std::to_string(n - k) + ":";
  return o;
}

std::string problems_text(const Scenario& s) {
  std::string t;
  for (size_t i = 0; i < s.problems.size(); ++i) t += (i ? "; " : " ") + s.problems[i];
  return t;
}

// "" when fp16 mixed precision can be switched on from outside (an AmpProbe that accepts fp16: a
// Python recipe lists it in amp_dtypes), else why not.
std::string amp_unavailable(const CheckContext& ctx) {
  std::unique_ptr<Run> r = ctx.make_run();
  auto* probe = dynamic_cast<tc::AmpProbe*>(r.get());
  if (probe == nullptr) return "the recipe does not implement tc::AmpProbe";
  tc::AmpOptions fp16;
  fp16.dtype = c10::kHalf;
  try {
    probe->set_amp(fp16);
  } catch (const ProbeNotProvided& e) {
    return e.what();
  }
  return "";
}

// fp32: the plain resume. Returns whether it held.
bool resume_bitwise(const CheckContext& ctx, const std::string& no_amp, Findings& out, nlohmann::json& fingerprint) {
  const bool amp_next = no_amp.empty();
  Scenario plain = resume_scenario(ctx, nullptr);
  out.metrics() = plain.metrics;
  fingerprint = plain.fingerprint;
  if (!plain.problems.empty()) {
    out.broken("resume_bitwise", plain.summary + problems_text(plain) +
                                     (amp_next ? " (the fp16 pass not run: the fp32 resume already differs)" : ""));
    return false;
  }
  out.held("resume_bitwise",
           plain.summary + (amp_next ? "" : "\n(no AMP pass: " + no_amp + ")"));
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
  const std::string no_amp = amp_unavailable(ctx);
  nlohmann::json fingerprint;
  if (resume_bitwise(ctx, no_amp, f, fingerprint) && no_amp.empty()) resume_bitwise_amp(ctx, f);
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
