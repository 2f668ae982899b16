// reproducibility: two fresh runs with one seed give bitwise-equal loss curves, parameters and
// eval metrics, and so does a run in another process (what a process fixes once, e.g. a value read
// from std::random_device into a static, is the same for two runs in one process); another seed
// gives another run.
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>

#include <torch/torch.h>

#include "harness/util/text_format.h"
#include "suites/reproducibility/divergence.h"
#include "suites/support/fingerprint.h"
#include "suites/support/kit.h"
#include "suites/support/tensor_compare.h"

namespace tc {
namespace {

struct Trace {
  std::vector<double> losses;
  NamedTensors params;
  EvalResult eval;
  bool deterministic = false;
};

Trace train(const CheckContext& ctx, int64_t seed) {
  std::unique_ptr<Run> run = fresh_run(ctx, run_options(ctx, seed));
  const int64_t steps = 2 * run->steps_per_epoch();  // two epochs: reshuffle and re-augment
  Trace t;
  for (int64_t i = 0; i < steps; ++i) t.losses.push_back(run->train_step().loss);
  t.eval = run->evaluate();
  t.eval.logits = t.eval.logits.detach().to(torch::kCPU).clone();
  t.params = snapshot(run->parameters());
  return t;
}

// What a run in another process hands back for the comparison: every loss's bits, each parameter
// as FNV-1a 64 of its bytes (with its float64 sum, to say by how much it moved), the eval loss's bits,
// the accuracy and the logits' hash. Bitwise by nature: the same code runs twice with one seed.
uint64_t bits(double v) {
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

double from_bits(uint64_t b) {
  double v = 0;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

std::string bytes_hash(const at::Tensor& t) {
  const at::Tensor c = t.detach().cpu().contiguous();
  const auto* p = static_cast<const unsigned char*>(c.data_ptr());
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  for (size_t i = 0; i < c.nbytes(); ++i) h = (h ^ p[i]) * 1099511628211ull;
  std::string shape;
  for (int64_t d : c.sizes()) {
    if (!shape.empty()) shape += 'x';  // two appends: see shape_of in suites/support/fingerprint.cpp
    shape += std::to_string(d);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::string(c.dtype().name()) + "[" + shape + "]:" + hex;
}

// A task without accuracy (a regression, a language model) records none, not a 0.
nlohmann::json accuracy_of(const EvalResult& e) { return e.has_accuracy ? nlohmann::json(e.accuracy) : nlohmann::json(nullptr); }

// What the evaluation is compared by: "eval loss, accuracy and logits" or, without accuracy, "eval
// loss and outputs".
std::string eval_parts(const EvalResult& e) { return e.has_accuracy ? "eval loss, accuracy and logits" : "eval loss and outputs"; }

// ", accuracy A vs B" where the task has one.
std::string accuracy_text(const EvalResult& e, const nlohmann::json& other) {
  if (!e.has_accuracy || !other.is_number()) return "";
  return ", accuracy " + fmt::sig(e.accuracy) + " vs " + fmt::sig(other.get<double>());
}

nlohmann::json fingerprint(const Trace& t) {
  nlohmann::json losses = nlohmann::json::array(), params = nlohmann::json::array();
  for (double l : t.losses) losses.push_back(bits(l));
  for (const auto& [name, p] : t.params) {
    params.push_back({{"name", name}, {"hash", bytes_hash(p)}, {"sum", p.to(torch::kDouble).sum().item<double>()}});
  }
  return {{"loss_bits", losses},
          {"params", params},
          {"eval_loss_bits", bits(t.eval.loss)},
          {"eval_accuracy", accuracy_of(t.eval)},
          {"eval_logits", bytes_hash(t.eval.logits)}};
}

// This process's first run against the same run made in a fresh process (`there`, its fingerprint).
// Where they differ, `again` runs it in a second fresh process, whose agreement with one side or
// neither says what differs (suites/reproducibility/divergence.h): only then is a cause named.
void other_process_bitwise(const CheckContext& ctx, const Trace& a, const nlohmann::json& there,
                           const std::function<nlohmann::json()>& again, Findings& out) {
  const nlohmann::json here = fingerprint(a);
  std::vector<std::string> problems;
  const auto& la = here["loss_bits"];
  const auto& lb = there.at("loss_bits");
  std::optional<size_t> step;
  for (size_t i = 0; i < std::max(la.size(), lb.size()) && !step; ++i) {
    if (i >= la.size() || i >= lb.size() || la[i].get<uint64_t>() != lb[i].get<uint64_t>()) step = i;
  }
  out.metrics()["other_process_first_divergence_step"] = step ? nlohmann::json(*step) : nlohmann::json(nullptr);
  if (step) {
    std::string d = "loss curves diverge at step " + std::to_string(*step);
    if (*step < la.size() && *step < lb.size()) {
      d += ": loss " + fmt::sig(from_bits(la[*step].get<uint64_t>()), 9) + " here vs " +
           fmt::sig(from_bits(lb[*step].get<uint64_t>()), 9) + " there";
    } else {
      d += ": " + std::to_string(la.size()) + " steps here, " + std::to_string(lb.size()) + " there";
    }
    problems.push_back(d);
  }
  const auto& pa = here["params"];
  const auto& pb = there.at("params");
  for (size_t i = 0; i < std::max(pa.size(), pb.size()); ++i) {
    if (i >= pa.size() || i >= pb.size()) {
      problems.push_back(std::to_string(pa.size()) + " parameter tensors here, " + std::to_string(pb.size()) + " there");
      break;
    }
    if (pa[i]["name"] != pb[i].at("name") || pa[i]["hash"] != pb[i].at("hash")) {
      problems.push_back("parameter '" + pa[i]["name"].get<std::string>() + "' differs after training (sum " +
                         fmt::sig(pa[i]["sum"].get<double>(), 9) + " here vs " +
                         fmt::sig(pb[i].at("sum").get<double>(), 9) + " there)");
      break;
    }
  }
  if (here["eval_loss_bits"].get<uint64_t>() != there.at("eval_loss_bits").get<uint64_t>() || here["eval_accuracy"] != there.at("eval_accuracy") ||
      here["eval_logits"] != there.at("eval_logits")) {
    problems.push_back("eval metrics differ: loss " + fmt::sig(a.eval.loss, 9) + " here vs " +
                       fmt::sig(from_bits(there.at("eval_loss_bits").get<uint64_t>()), 9) + " there" +
                       accuracy_text(a.eval, there.at("eval_accuracy")));
  }
  const std::string what = "a run with seed " + std::to_string(ctx.seed) + " in a fresh process";
  if (!problems.empty()) {
    std::string ev = what + " differs from this process's: ";
    for (size_t i = 0; i < problems.size(); ++i) ev += (i ? "; " : "") + problems[i];
    // Where two runs in this process already differ, the runs are not reproducible at all
    // (same_seed_bitwise's finding): no second fresh run is needed to say so.
    const bool in_process_agreed = !out.any_broken();
    if (in_process_agreed && again) {
      const reproducibility::Divergence d = reproducibility::classify(here, there, again());
      out.metrics()["second_fresh_process"] = reproducibility::to_string(d);
      if (d == reproducibility::Divergence::kSecondAgreesHere) {
        // The first fresh run was the odd one: blamed only where the difference repeats.
        const int r = reproducibility::first_repeat(here, again);
        if (r > 0) {
          out.metrics()["repeat_runs"] = {{"run", r}, {"of", reproducibility::kRepeatRuns}, {"repeated", true}};
          out.broken("other_process_bitwise", ev + " (" + reproducibility::repeated(r, reproducibility::kRepeatRuns) + ")");
          return;
        }
        out.metrics()["repeat_runs"] = {{"of", reproducibility::kRepeatRuns}, {"repeated", false}};
        out.recorded("other_process_bitwise", reproducibility::not_repeated(reproducibility::kRepeatRuns) + " (" + ev + ")");
        return;
      }
      ev += " (" + reproducibility::explain(d, in_process_agreed) + ")";
    }
    out.broken("other_process_bitwise", ev);
  } else {
    out.held("other_process_bitwise", what + ": " + std::to_string(la.size()) + " losses, " +
                                          std::to_string(pa.size()) +
                                          " parameter tensors, " + eval_parts(a.eval) + " bitwise equal");
  }
}

// Two runs with one seed: loss curve, parameters and eval metrics bitwise equal.
void same_seed_bitwise(const CheckContext& ctx, const Trace& a, const Trace& b, Findings& out) {
  nlohmann::json& m = out.metrics();
  std::vector<std::string> problems;
  auto curve = first_difference(a.losses, b.losses);
  m["first_divergence_step"] = curve ? nlohmann::json(*curve) : nlohmann::json(nullptr);
  if (curve) problems.push_back("loss curves diverge at " + describe_curve_difference(a.losses, b.losses, *curve));
  auto param = first_tensor_difference(a.params, b.params);
  m["first_diverging_tensor"] = param ? nlohmann::json(param->name) : nlohmann::json(nullptr);
  m["max_abs_diff"] = param ? param->max_abs_diff : 0.0;
  if (param) {
    problems.push_back("parameter '" + param->name + "' differs after training (max |diff| " +
                       fmt::sig(param->max_abs_diff, 3) + ")" + param->detail);
  }
  const bool eval_equal = std::memcmp(&a.eval.loss, &b.eval.loss, sizeof(double)) == 0 &&
                          a.eval.accuracy == b.eval.accuracy && torch::equal(a.eval.logits, b.eval.logits);
  if (!eval_equal) {
    problems.push_back("eval metrics differ: loss " + fmt::sig(a.eval.loss, 9) + " vs " +
                       fmt::sig(b.eval.loss, 9) + accuracy_text(a.eval, accuracy_of(b.eval)) +
                       (a.eval.has_accuracy ? ", logits" : ", outputs") + " max |diff| " +
                       fmt::sig(max_abs_diff(a.eval.logits, b.eval.logits), 3));
  }
  const std::string what = "two runs with seed " + std::to_string(ctx.seed);
  if (!problems.empty()) {
    std::string ev = what + " differ: ";
    for (size_t i = 0; i < problems.size(); ++i) ev += (i ? "; " : "") + problems[i];
    out.broken("same_seed_bitwise", ev + " (another seed not tried: one seed already gives two runs)");
  } else {
    out.held("same_seed_bitwise", what + ": " + std::to_string(a.losses.size()) + " losses, " +
                                      std::to_string(a.params.size()) +
                                      " parameter tensors, " + eval_parts(a.eval) + " bitwise equal");
  }
}

// The seed must reach the run: another seed, another run.
void other_seed_differs(const CheckContext& ctx, const Trace& a, Findings& out) {
  const Trace c = train(ctx, ctx.seed + 1);
  auto other = first_difference(a.losses, c.losses);
  out.metrics()["other_seed_first_divergence_step"] = other ? nlohmann::json(*other) : nlohmann::json(nullptr);
  if (!other && !first_tensor_difference(a.params, c.params)) {
    out.broken("other_seed_differs", "seeds " + std::to_string(ctx.seed) + " and " + std::to_string(ctx.seed + 1) +
                                         " gave bitwise-identical runs: the seed does not reach the run");
  } else {
    out.held("other_seed_differs", "seed " + std::to_string(ctx.seed + 1) + " diverged" +
                                       (other ? " at step " + std::to_string(*other) : " in the parameters"));
  }
}

// The part a fresh process runs: one run with the cell's seed, handed back as its fingerprint.
constexpr const char* kFreshRun = "same_seed_run";

CheckResult check_reproducibility(const CheckContext& ctx) {
  if (ctx.part == kFreshRun) {
    return CheckResult::pass("one run with seed " + std::to_string(ctx.seed) + " for another process",
                             fingerprint(train(ctx, ctx.seed)));
  }
  if (!ctx.part.empty()) throw HarnessError("reproducibility has no part '" + ctx.part + "'");
  // The fresh process trains while this one makes its two runs.
  std::future<nlohmann::json> there;
  if (ctx.in_fresh_process) there = std::async(std::launch::async, ctx.in_fresh_process, std::string(kFreshRun));
  const Trace a = train(ctx, ctx.seed);
  const Trace b = train(ctx, ctx.seed);
  Findings f;
  f.metrics() = {{"steps", a.losses.size()},
                 {"seed", ctx.seed},
                 {"loss_curve_a", a.losses},
                 {"loss_curve_b", b.losses},
                 {"eval_accuracy_a", accuracy_of(a.eval)},
                 {"eval_accuracy_b", accuracy_of(b.eval)}};
  // What this environment computed: the first run (the cell's seed, two epochs) for `compare`.
  f.metrics()["fingerprint"] = training_fingerprint(
      "the first of the two runs with seed " + std::to_string(ctx.seed) + " (" + std::to_string(a.losses.size()) +
          " steps)",
      a.losses, a.params);
  same_seed_bitwise(ctx, a, b, f);
  if (there.valid()) {
    other_process_bitwise(ctx, a, there.get(), [&ctx] { return ctx.in_fresh_process(kFreshRun); }, f);
  } else {
    f.recorded("other_process_bitwise",
               "not compared: this runner starts no fresh process (RunPlan::executable is empty)");
  }
  // Where one seed already gives two runs, another seed differing proves nothing: not tried.
  if (!f.any_broken()) other_seed_differs(ctx, a, f);
  return f.result();
}

}  // namespace
}  // namespace tc

namespace tc {
TC_CHECK(reproducibility,
         "two runs with one seed, in this process and in another, give bitwise-equal loss curves, "
              "parameters and eval metrics; another seed gives another run")
    ->Promise("same_seed_bitwise", "two runs with one seed give bitwise-equal loss curves, parameters and eval metrics")
    ->Promise("other_process_bitwise", "a run with that seed in another process is bitwise equal too")
    ->Promise("other_seed_differs", "another seed gives another run");
}  // namespace tc
