#include "suites/distributed/judge.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "harness/util/text_format.h"
#include "suites/support/kit.h"

namespace tc::distributed {
namespace {

using nlohmann::json;

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// What every rank recorded, as rank 0 judges it: ranks[r][run] is rank r's record of run `run`.
struct Records {
  const std::vector<json>& ranks;
  int world = 0;
  bool one_host = false;  // every rank on this host: save's return can be timed against the file
  const json& r0() const { return ranks[0]; }
  int runs() const { return static_cast<int>(ranks[0].size()); }
};

// 1. Step-0 gradients after all-reduce against the check's own (one process, the whole batch).
void ddp_gradients(const Records& rec, Findings& out) {
  const json& g = rec.r0()[0]["gradients"];
  out.metrics()["grad_tolerance_rel"] = kGradRelTolerance;
  if (g.contains("not_comparable")) {
    out.recorded("ddp_gradients", "not judged: one process cannot compute the ranks' gradients: " +
                                      g["not_comparable"].get<std::string>());
    return;
  }
  if (g.contains("problem")) {
    out.broken("ddp_gradients", "step-0 gradients: " + g["problem"].get<std::string>());
    return;
  }
  const double diff = g["max_rel_diff"].get<double>();
  out.metrics()["grad_max_rel_diff"] = diff;
  if (!(diff <= kGradRelTolerance)) {
    out.broken("ddp_gradients",
               "step-0 gradients differ from one process on the whole batch of " +
                   std::to_string(g["batch"].get<int64_t>()) + " (computed by the check): max |diff| " +
                   fmt::sig(diff, 3) + " of the largest |gradient| (" + g["where"].get<std::string>() +
                   "), tolerance " + fmt::sig(kGradRelTolerance, 1),
               diff, kGradRelTolerance);
  } else {
    out.held("ddp_gradients",
             "step-0 gradients equal one process on the whole batch (computed by the check; max |diff| " +
                 fmt::sig(diff, 2) + " of the largest |gradient|, tolerance " +
                 fmt::sig(kGradRelTolerance, 1) + ")",
             diff, kGradRelTolerance);
  }
}

// 2. Every rank's parameters bitwise rank 0's after every step.
void replicas_identical(const Records& rec, Findings& out) {
  const json& r0 = rec.r0();
  for (int k = 0; k < rec.runs(); ++k) {
    for (size_t s = 0; s < r0[k]["steps"].size(); ++s) {
      for (int r = 1; r < rec.world; ++r) {
        if (rec.ranks[r][k]["steps"][s]["params"] != r0[k]["steps"][s]["params"]) {
          out.metrics()["replicas_identical_every_step"] = false;
          out.broken("replicas_identical", "replicas differ after step " + std::to_string(s) + " (rank " +
                                               std::to_string(r) + "'s parameters are not rank 0's)");
          return;
        }
      }
    }
  }
  out.metrics()["replicas_identical_every_step"] = true;
  out.held("replicas_identical", "replicas bitwise identical after every step");
}

// 3. Each epoch every sample once across ranks; the order changes with the epoch and repeats with
// the seed (the second run).
void sampler(const Records& rec, Findings& out) {
  const json& r0 = rec.r0();
  const int n_runs = rec.runs();
  std::vector<std::string> problems;
  bool any_samples = false;
  for (int r = 0; r < rec.world && !any_samples; ++r) {
    for (const json& step : rec.ranks[r][0]["steps"]) any_samples = any_samples || !step["samples"].empty();
  }
  if (!any_samples) {
    // No indices: nothing to count (a Python recipe whose StepRecord carries no `samples`).
    out.recorded("sampler", "not judged: the recipe reports no dataset indices of its batches (DistStep.samples; "
                            "a Python recipe's StepRecord.samples)");
    return;
  }
  std::vector<std::vector<std::vector<int64_t>>> order(n_runs);  // [run][epoch] global order
  for (int k = 0; k < n_runs; ++k) {
    const int64_t spe = r0[k]["steps_per_epoch"].get<int64_t>();
    order[k].resize(kEpochs);
    for (size_t s = 0; s < r0[k]["steps"].size(); ++s) {
      const int64_t e = static_cast<int64_t>(s) / spe;
      for (int r = 0; r < rec.world; ++r) {
        for (int64_t i : rec.ranks[r][k]["steps"][s]["samples"]) order[k][e].push_back(i);
      }
    }
  }
  for (int e = 0; e < kEpochs; ++e) {
    std::map<int64_t, int> seen;
    for (int64_t i : order[0][e]) ++seen[i];
    const int64_t n = r0[0]["dataset_size"].get<int64_t>();
    int dup = 0, missing = 0, foreign = 0;
    for (const auto& [i, count] : seen) foreign += (i < 0 || i >= n) ? 1 : 0;
    for (int64_t i = 0; i < n; ++i) {
      if (seen[i] == 0) ++missing;
      if (seen[i] > 1) ++dup;
    }
    if (dup || missing || foreign) {
      problems.push_back("epoch " + std::to_string(e) + ": " + std::to_string(dup) + " samples seen more than once "
                         "across ranks, " + std::to_string(missing) + " never, " + std::to_string(foreign) +
                         " indices outside the dataset of " + std::to_string(n));
    }
  }
  const bool order_changes = order[0][0] != order[0][1];
  out.metrics()["order_changes_with_epoch"] = order_changes;
  // What was seen, not a guess at why (a sampler reset after set_epoch gives the same order too).
  if (!order_changes) problems.push_back("epoch 1 saw the samples in the same order as epoch 0, across all ranks");
  const bool repeats = n_runs > 1 && order[0] == order[1];
  out.metrics()["order_repeats_across_runs"] = repeats;
  if (!repeats) problems.push_back("a second run from the same seed saw the samples in another order");
  out.metrics()["final_params_repeat_across_runs"] = n_runs > 1 && r0[0]["final_params"] == r0[1]["final_params"];
  if (!problems.empty()) {
    out.broken("sampler", join(problems, "; "));
  } else {
    out.held("sampler", "each epoch saw every sample once across ranks, in a new order, repeated by a second run");
  }
}

// 4. Each save and the report: every file written once (rank 0's inotify counts), not once per rank.
void rank0_writes(const Records& rec, Findings& out) {
  const json& r0 = rec.r0();
  int max_writes = 0, files_written = 0;
  std::string first_multi;
  for (int k = 0; k < rec.runs(); ++k) {
    std::vector<json> windows(r0[k]["saves"].begin(), r0[k]["saves"].end());
    windows.push_back(r0[k]["report"]);
    for (size_t w = 0; w < windows.size(); ++w) {
      for (const auto& [name, n] : windows[w]["writes"].items()) {
        ++files_written;
        if (n.get<int>() > max_writes) max_writes = n.get<int>();
        if (n.get<int>() > 1 && first_multi.empty()) {
          first_multi = "'" + name + "' was written " + std::to_string(n.get<int>()) + " times in one " +
                        (w + 1 == windows.size() ? "report" : "save") + " by " + std::to_string(rec.world) + " ranks";
        }
      }
    }
  }
  out.metrics()["max_writes_of_a_file_per_save"] = max_writes;
  std::vector<std::string> problems;
  if (files_written == 0) problems.push_back("no checkpoint or report was written");
  if (max_writes > 1) problems.push_back("every rank writes: " + first_multi);
  if (!problems.empty()) {
    out.broken("rank0_writes", join(problems, "; "));
  } else {
    out.held("rank0_writes", "each save and report written once");
  }
}

// 5. When save returns, every rank loads the checkpoint's model into a bare model and finds its own
// parameters; on one host, no rank returned before the file was renamed in.
void checkpoint_loads_unwrapped(const Records& rec, Findings& out) {
  const json& r0 = rec.r0();
  int bad_loads = 0, early_returns = 0, other_weights = 0;
  std::string first_bad_load;
  for (int k = 0; k < rec.runs(); ++k) {
    for (size_t w = 0; w < r0[k]["saves"].size(); ++w) {
      const json& rank0_save = r0[k]["saves"][w];
      for (int r = 0; r < rec.world; ++r) {
        const json& o = rec.ranks[r][k]["saves"][w];
        if (o["load"] != "ok") {
          ++bad_loads;
          if (o["load"].get<std::string>().find("holds other weights") != std::string::npos) ++other_weights;
          if (first_bad_load.empty()) {
            first_bad_load = "rank " + std::to_string(r) + " right after save " + std::to_string(w) + ": " +
                             o["load"].get<std::string>();
          }
        }
        if (rec.one_host && rank0_save.contains("ctime_ns") &&
            o["returned_ns"].get<int64_t>() < rank0_save["ctime_ns"].get<int64_t>()) {
          ++early_returns;
          if (first_bad_load.empty()) {
            first_bad_load = "rank " + std::to_string(r) + "'s save " + std::to_string(w) + " returned " +
                             fmt::sig((rank0_save["ctime_ns"].get<int64_t>() - o["returned_ns"].get<int64_t>()) / 1e6, 3) +
                             " ms before the checkpoint was in place";
          }
        }
      }
    }
  }
  out.metrics()["loads_after_save_failed"] = bad_loads;
  out.metrics()["saves_returned_before_file_in_place"] = early_returns;
  const json& first_save = r0[0]["saves"].empty() ? json::object() : r0[0]["saves"][0];
  if (!bad_loads && !early_returns && first_save.contains("load_not_judged")) {
    out.recorded("checkpoint_loads_unwrapped", "not judged: no bare model to load the checkpoint into (" +
                                                   first_save["load_not_judged"].get<std::string>() + ")");
    return;
  }
  if (bad_loads || early_returns) {
    // The headline says what the observations show: a save that returned before its file was in
    // place, a file whose weights are not a rank's (its replica differs), or a load that failed.
    const std::string what = early_returns ? "a save returned before the checkpoint was in place"
                             : other_weights == bad_loads
                                 ? "right after save, the checkpoint holds other weights than a rank's own (the "
                                   "replicas differ)"
                                 : "a rank could not load the checkpoint into a bare model right after save";
    out.broken("checkpoint_loads_unwrapped", what + " (" + std::to_string(bad_loads) + " failed loads, " +
                                                 std::to_string(early_returns) + " early returns): " + first_bad_load);
  } else {
    out.held("checkpoint_loads_unwrapped", "every rank loaded each checkpoint into a bare model right after save");
  }
}

// 6. Training resumes from a checkpoint on every rank: each rank's losses and parameters after the
// resume are bitwise its own straight run's.
void resume_every_rank(const std::vector<json>& resumes, Findings& out) {
  std::vector<std::string> problems;
  for (size_t r = 0; r < resumes.size(); ++r) {
    const json& o = resumes[r];
    const std::string who = "rank " + std::to_string(r);
    if (o.contains("error")) {
      problems.push_back(who + ": " + o["error"].get<std::string>());
      continue;
    }
    const std::vector<double> a = o["straight_losses"].get<std::vector<double>>();
    const std::vector<double> b = o["resumed_losses"].get<std::vector<double>>();
    const int64_t k = o["resume_at"].get<int64_t>();
    for (size_t i = 0; i < b.size(); ++i) {
      const size_t s = static_cast<size_t>(k) + i;
      if (s < a.size() && a[s] != b[i]) {
        problems.push_back(who + ": the loss of step " + std::to_string(s) + " is " + fmt::sig(b[i], 9) +
                           " after the resume, " + fmt::sig(a[s], 9) + " straight");
        break;
      }
    }
    if (o["straight_params"] != o["resumed_params"]) {
      problems.push_back(who + ": parameters after " + std::to_string(o["steps"].get<int64_t>()) +
                         " steps differ from the straight run's (digest " + o["resumed_params"].get<std::string>() +
                         " vs " + o["straight_params"].get<std::string>() + ")");
    }
  }
  out.metrics()["resume"] = resumes.empty() ? json(nullptr) : json{{"resume_at", resumes[0]["resume_at"]},
                                                                      {"steps", resumes[0]["steps"]}};
  if (!problems.empty()) {
    out.broken("resume_every_rank", "k steps + save + new objects on every rank + load + the rest against the "
                                    "straight run: " + join(problems, "; "));
  } else if (!resumes.empty()) {
    out.held("resume_every_rank", "every rank resumed from the checkpoint saved at step " +
                                      std::to_string(resumes[0]["resume_at"].get<int64_t>()) + " (mid-epoch) and ran on to step " +
                                      std::to_string(resumes[0]["steps"].get<int64_t>()) +
                                      " with losses and parameters bitwise its straight run's");
  }
}

}  // namespace

// Rank 0: the records of every rank -> the verdict.
CheckResult assess_ranks(const std::vector<json>& all, const World& w) {
  const int world = w.size;
  const bool one_host = w.one_host();
  const std::string& label = w.label;
  // all[r] = {"runs": rank r's records of the two runs, "resume": its resume}
  std::vector<json> ranks, resumes;
  for (const json& a : all) {
    ranks.push_back(a["runs"]);
    resumes.push_back(a["resume"]);
  }
  const Records rec{ranks, world, one_host};
  Findings f;
  f.metrics() = {{"world_size", world}};
  ddp_gradients(rec, f);
  replicas_identical(rec, f);
  sampler(rec, f);
  rank0_writes(rec, f);
  checkpoint_loads_unwrapped(rec, f);
  resume_every_rank(resumes, f);
  return f.result(label + ":");
}

}  // namespace tc::distributed
