// The check-authoring kit: a fresh run of the cell's recipe with a probe, and the findings of a
// check, every promise with its evidence.
//
//   CheckResult check_my_check(const CheckContext& ctx) {
//     Findings f;
//     auto a = fresh_run_with<AmpProbe>(ctx, "tc::AmpProbe (harness/contract/amp_probe.h)");
//     a.probe->set_amp(options);
//     a.run->setup(run_options(ctx, ctx.seed));
//     ...
//     if (ok) f.held("parity", "fp16 loss within 8u of fp32"); else f.broken("parity", "step 3: ...");
//     f.metrics()["parity"] = {...};
//     return f.result();   // fail when any promise broke; evidence names each one
//   }
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/contract/registry.h"
#include "harness/contract/run.h"

namespace tc {

// A fresh, not yet set-up run of the cell's recipe, and its probe interface P (which the recipe
// implements next to tc::Run).
template <typename P>
struct ProbedRun {
  std::unique_ptr<Run> run;
  P* probe = nullptr;
};

// A fresh run of the cell's recipe, set up with `options` (most checks: run_options(ctx, seed)).
std::unique_ptr<Run> fresh_run(const CheckContext& ctx, const RunOptions& options);

// The reason a recipe lacking a probe is skipped: for a C++ recipe the interface it would implement;
// for a Python recipe (which cannot implement a C++ interface) that torchconform.Run has no method
// for it yet, in the Python recipe's terms.
std::string probe_missing_reason(const CheckContext& ctx, const std::string& interface, const std::string& why);

// Skips the cell (ProbeNotProvided, probe_missing_reason) when the recipe lacks P.
template <typename P>
ProbedRun<P> fresh_run_with(const CheckContext& ctx, const std::string& interface, const std::string& why = "") {
  ProbedRun<P> r;
  r.run = ctx.make_run();
  r.probe = dynamic_cast<P*>(r.run.get());
  if (r.probe == nullptr) throw ProbeNotProvided(probe_missing_reason(ctx, interface, why));
  return r;
}

// Every promise a check judged. result() fails when any broke, with every broken promise in the
// evidence (not only the first) and then what held or was recorded; metrics.promises lists each one:
// {"id", "status": "held" | "broken" | "recorded", "evidence"}.
// Checks that judge the second epoch (step_hygiene's first step of it, data_saturation's order) run
// the first without judging it, up to this many steps.
inline constexpr int64_t kMostStepsToSecondEpoch = 64;
// "" where an epoch of `steps_per_epoch` steps is within that; else why the second epoch is not
// judged ("the first epoch is N steps (at most 64 are run to reach the second)").
std::string second_epoch_out_of_reach(int64_t steps_per_epoch);

class Findings {
 public:
  void held(const std::string& promise, const std::string& evidence);
  void broken(const std::string& promise, const std::string& evidence);
  // A measured promise: `deviation` judged against `bar` (broken when it exceeds the bar, in the
  // units the evidence states). metrics.promises records both and margin = deviation / bar, so a
  // test can require a variant to be caught clearly, and the reference to hold clearly.
  void held(const std::string& promise, const std::string& evidence, double deviation, double bar);
  void broken(const std::string& promise, const std::string& evidence, double deviation, double bar);
  // Measured and reported, not judged (e.g. a throughput on hardware where it means nothing).
  void recorded(const std::string& promise, const std::string& evidence);
  // Several things found broken for one promise (ranks, files, steps): broken, when there are any,
  // with the first `shown` of them (fmt::first_items); returns whether there were.
  bool broken_if_any(const std::string& promise, const std::vector<std::string>& items, size_t shown = 2);

  bool any_broken() const;
  nlohmann::json& metrics() { return metrics_; }
  // `head`, when given, is a first line that frames every promise below it (e.g. "cpu×2:",
  // "evaluation after one epoch:").
  CheckResult result(const std::string& head = "") const;

 private:
  struct Entry {
    std::string promise, status, evidence;
    nlohmann::json measure;  // {"deviation", "bar", "margin"} for a measured promise, else null
  };
  std::vector<Entry> entries_;
  nlohmann::json metrics_ = nlohmann::json::object();
};

}  // namespace tc
