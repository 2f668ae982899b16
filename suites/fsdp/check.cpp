// fsdp: sharded data-parallel training (FSDP) under torchrun is the training DDP does, each rank
// holds about 1/N of the training state, its checkpoint is whole and written once, and a sharded
// run resumes from it bitwise.
//
// A multi-process check (->MultiProcess(2): 2 ranks with Gloo on the CPU, one rank per GPU with
// NCCL on CUDA; harness/multi_process.h). It drives the recipe through tc::DataParallelProbe
// (harness/contract/data_parallel_probe.h): the check asks for sharded ("fsdp") or replicated
// ("ddp") training before setup(); how the recipe shards is what is measured. FSDP's fully_shard has
// no C++ counterpart, so only Python recipes implement the probe; a C++ recipe's cell skips, naming
// it. Every rank runs, from the same seed (T = two epochs, K = one epoch and a step):
//
//   D: "ddp", T steps;  F: "fsdp", T steps;  S: "fsdp", K steps, save_checkpoint, T - K steps;
//   R: "fsdp", load_checkpoint(S's file), T - K steps.
//
// and sends rank 0 what it measured (the probe's exchange over the recipe's own process group);
// rank 0 judges:
//
// 1. matches_ddp: F against D on every rank: the parameters both start from are equal, and per
//    step t (from 0) |loss_F - loss_D| <= (t+1) eps |loss_D|, after T steps
//    ||p_F - p_D|| <= T eps ||p_D - p_0|| (whole parameters, p_0 the initial ones), with
//    eps = sqrt(n) u, u the unit roundoff of the parameters' dtype (fp32: 2^-24) and n the number of
//    parameter elements (at least the world size). Why: sharding changes no operation of the
//    step, only the order of two kinds of sums: the gradients' average over the N ranks
//    (reduce-scatter instead of all-reduce) and any reduction over all parameters that now runs
//    shard by shard (the gradient norm of clipping: a sum of squares of all n elements, per shard
//    and then across ranks). A reordered sum of n terms moves by about sqrt(n) u of the sum of
//    their magnitudes when the rounding errors are independent (Higham, "Accuracy and Stability",
//    4.2, the statistical estimate of the worst case (n-1)u); a difference made at one step is
//    carried by the later ones, so T steps add at most T of them. Measured on py_reference (the
//    seeds' CNN, n = 4,580, eps = 68u; T = 12, fp32, 2 Gloo ranks): the losses within 4u, the update
//    within 4u (docs/checks.md). A recipe whose step reduces over more
//    terms than its parameter count (a batch-norm over a huge batch) would need a wider bound: n is
//    read from the recipe's parameters, not from its other reductions.
// 2. shards_one_over_n: after F's first step each rank holds, of the parameters, of their gradients
//    and of the optimizer's state, at most 1/N of the bytes they have whole plus one dim-0 row per
//    tensor (the padding of an uneven split: FSDP2 shards dim 0, FSDP1 a flat concatenation, both
//    within this), and the optimizer updates no tensor that is not one of the model's parameters
//    (an optimizer made before fully_shard keeps the unsharded originals, whole on every rank).
// 3. checkpoint_loads_bare: S's checkpoint, loaded by rank 0 into the recipe's bare, unsharded model
//    strictly (tc::BareModelProbe), holds exactly the whole parameters at the save.
// 4. resume_bitwise: R's losses and final whole parameters bitwise S's from K on (the same code run
//    twice: no tolerance).
// 5. rank0_writes: in the save every file in the checkpoint's directory is written once (rank 0's
//    inotify watch counts renames onto and closes of each name; ranks on one host), not once per
//    rank.
// An error a leg raises is the evidence of the promise that leg serves; the legs after it are
// recorded, not judged (a run that cannot train to the save point has no checkpoint to judge).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <sstream>

#include <torch/torch.h>

#include "harness/contract/data_parallel_probe.h"
#include "harness/contract/state_probes.h"
#include "harness/util/text_format.h"
#include "suites/support/kit.h"
#include "suites/support/numbers.h"
#include "suites/support/tensor_compare.h"
#include "suites/support/tolerance.h"
#include "suites/support/write_watch.h"

namespace tc {
namespace {

using nlohmann::json;

const char* kInterface = "tc::DataParallelProbe (harness/contract/data_parallel_probe.h)";
const char* kWhy =
    "the check judges Python recipes only: FSDP (torch.distributed.fsdp.fully_shard) has no C++ "
    "counterpart in LibTorch";

using fmt::first_line;

// One leg of training on this rank: what it lost and held, or where it raised.
struct Leg {
  std::vector<double> losses;
  at::Tensor start, end;  // whole parameters, flattened (double)
  std::string error;      // "" when the leg ran through
  int64_t error_step = -1;
  bool ran() const { return error.empty(); }
};

// Trains `steps` steps from where `run` is; whole parameters at both ends (collective). An exception
// ends the leg (every rank raises alike for a recipe's own error; a rank left waiting in a
// collective raises when the group's timeout expires).
void train(Run& run, DataParallelProbe& probe, int64_t steps, Leg& leg, const std::function<void(int64_t)>& after = {}) {
  int64_t s = 0;
  try {
    if (!leg.start.defined()) leg.start = flat_double(probe.full_parameters());
    for (; s < steps; ++s) {
      leg.losses.push_back(run.train_step().loss);
      if (after) after(s);
    }
    leg.end = flat_double(probe.full_parameters());
  } catch (const SkipCell&) {
    throw;
  } catch (const std::exception& e) {
    leg.error = first_line(e.what());
    leg.error_step = s;
  }
}

json account_json(const ShardAccount& a) {
  return {{"local_bytes", a.local_bytes}, {"full_bytes", a.full_bytes}, {"row_bytes", a.row_bytes}, {"tensors", a.tensors}};
}

json leg_json(const Leg& l) {
  json j = {{"losses", l.losses}};
  if (!l.ran()) j["error"] = {{"step", l.error_step}, {"what", l.error}};
  return j;
}

// matches_ddp on this rank: the measured deviations (rank 0 judges them all).
json compare_with_ddp(const Leg& d, const Leg& f, double eps) {
  json j;
  if (!d.ran() || !f.ran()) return j;
  if (!torch::equal(d.start, f.start)) {
    j["start_differs"] = max_abs_diff(d.start, f.start);
    return j;
  }
  double worst = 0.0, worst_rel = 0.0;
  int64_t worst_step = 0;
  const size_t steps = std::min(d.losses.size(), f.losses.size());
  for (size_t t = 0; t < steps; ++t) {
    const double rel = std::abs(f.losses[t] - d.losses[t]) / std::max(std::abs(d.losses[t]), 1e-30);
    worst_rel = std::max(worst_rel, rel);
    if (!(rel / static_cast<double>(t + 1) <= worst)) {
      worst = rel / static_cast<double>(t + 1);
      worst_step = static_cast<int64_t>(t);
    }
  }
  const double update = (d.end - d.start).norm().item<double>();
  const double update_rel = update > 0 ? (f.end - d.end).norm().item<double>() / update
                                       : std::numeric_limits<double>::infinity();
  j["loss_rel_per_step"] = worst;  // max over t of |dL_t| / |L_t| / (t+1)
  j["loss_rel_max"] = worst_rel;
  j["worst_step"] = worst_step;
  j["update_rel"] = update_rel;
  j["deviation"] = std::max(worst, update_rel / static_cast<double>(steps)) / eps;  // in units of eps
  return j;
}

std::string bytes_text(int64_t b) {
  return b >= 1 << 20 ? fmt::sig(static_cast<double>(b) / (1 << 20), 3) + " MiB"
                      : std::to_string(b) + " B";
}

// What rank 0 judges: every rank's record and the run's figures.
struct Gathered {
  std::vector<json> ranks;  // in rank order
  int world = 0;
  int64_t steps = 0, k = 0;  // two epochs; the save after step k
  double u = 0.0, eps = 0.0, n_elements = 0.0;
  std::string legs_note;
};

std::string who(const json& rank) { return "rank " + std::to_string(rank["rank"].get<int>()); }

// --- what each rank observes ---------------------------------------------------------------------

// F: sharded, straight through; what this rank holds after the first step goes into `mine`.
Leg observe_sharded(Run& run, DataParallelProbe& probe, int64_t steps, json& mine) {
  Leg f;
  train(run, probe, steps, f, [&](int64_t s) {
    if (s != 0) return;
    try {
      const ShardBytes b = probe.shard_bytes();
      mine["bytes"] = {{"parameters", account_json(b.parameters)}, {"gradients", account_json(b.gradients)},
                       {"optimizer_state", account_json(b.optimizer_state)},
                       {"foreign_parameters", account_json(b.foreign_parameters)}, {"scalars", b.scalars},
                       {"unsharded", b.unsharded}};
    } catch (const std::exception& e) {
      mine["bytes_error"] = "counting what the rank holds raised: " + first_line(e.what());
    }
  });
  if (!mine.contains("bytes") && !mine.contains("bytes_error") && !f.ran()) {
    mine["bytes_error"] = "the first sharded step raised: " + f.error;
  }
  return f;
}

// D: replicated (DDP), when the recipe declares it.
Leg observe_ddp(const CheckContext& ctx, const RunOptions& options, int64_t steps, json& mine) {
  Leg d;
  auto ddp = fresh_run_with<DataParallelProbe>(ctx, kInterface, kWhy);
  try {
    ddp.probe->set_data_parallel("ddp");
    ddp.run->setup(options);
    train(*ddp.run, *ddp.probe, steps, d);
  } catch (const ProbeNotProvided& e) {
    mine["ddp_missing"] = first_line(e.what());
  }
  return d;
}

// Rank 0 loads the checkpoint into the recipe's bare, unsharded model: its record for
// checkpoint_loads_bare.
json load_into_bare(Run& run, const std::string& path, const at::Tensor& at_save) {
  auto* bare = dynamic_cast<BareModelProbe*>(&run);
  if (bare == nullptr) return {{"recorded", "the recipe provides no bare model (tc::BareModelProbe)"}};
  try {
    const BareModelLoad l = bare->load_into_bare_model(path);
    if (l.outcome == BareModelLoad::Outcome::kRefused) {
      return {{"broken", "a bare, unsharded model refuses it: " + first_line(l.detail)}};
    }
    if (l.outcome != BareModelLoad::Outcome::kLoaded) {
      return {{"recorded", "its model state is in a format of the recipe's own: " + first_line(l.detail)}};
    }
    const at::Tensor loaded = flat_double(l.parameters);
    if (loaded.sizes() == at_save.sizes() && torch::equal(loaded, at_save)) {
      return {{"ok", "loads strictly into the bare model and holds the whole parameters at the save"}};
    }
    return {{"broken", "loads into the bare model but holds other values than the whole parameters at the save "
                       "(max |diff| " +
                           (loaded.sizes() == at_save.sizes() ? sci(max_abs_diff(loaded, at_save)) : std::string("-, other sizes")) +
                           ")"}};
  } catch (const ProbeNotProvided& e) {  // no bare_model() of the recipe's: nothing to load into
    return {{"recorded", first_line(e.what())}};
  } catch (const std::exception& e) {
    return {{"broken", "loading it into a bare model raised: " + first_line(e.what())}};
  }
}

// S: sharded, saving after k steps (rank 0 watches the directory), then on to `steps`.
Leg observe_save(const CheckContext& ctx, const RunOptions& options, int64_t steps, int64_t k, const std::string& dir,
                 const std::string& path, json& mine) {
  Leg s;
  auto srun = fresh_run_with<DataParallelProbe>(ctx, kInterface, kWhy);
  srun.probe->set_data_parallel("fsdp");
  srun.run->setup(options);
  std::unique_ptr<WriteWatch> watch;
  if (ctx.world.rank == 0) watch = std::make_unique<WriteWatch>(dir);
  train(*srun.run, *srun.probe, k, s);
  if (!s.ran()) return s;
  srun.probe->barrier();
  if (watch) watch->drain();  // writes before the save are not its
  try {
    srun.run->save_checkpoint(path);
    srun.probe->barrier();
    if (watch) mine["writes"] = watch->drain();
  } catch (const std::exception& e) {
    mine["save_error"] = first_line(e.what());
    return s;
  }
  const at::Tensor at_save = s.end;  // the whole parameters at the save
  if (ctx.world.rank == 0) mine["bare"] = load_into_bare(*srun.run, path, at_save);
  Leg rest;
  rest.start = at_save;
  train(*srun.run, *srun.probe, steps - k, rest);
  s.losses.insert(s.losses.end(), rest.losses.begin(), rest.losses.end());
  s.end = rest.end;
  s.error = rest.error;
  s.error_step = rest.ran() ? -1 : k + rest.error_step;
  return s;
}

// R: a fresh sharded run resumed from S's checkpoint; `mine["resume"]` says whether it continued bitwise.
Leg observe_resume(const CheckContext& ctx, const RunOptions& options, int64_t steps, int64_t k, const std::string& path,
                   const Leg& s, json& mine) {
  Leg r;
  auto rrun = fresh_run_with<DataParallelProbe>(ctx, kInterface, kWhy);
  rrun.probe->set_data_parallel("fsdp");
  rrun.run->setup(options);
  try {
    rrun.run->load_checkpoint(path);
    train(*rrun.run, *rrun.probe, steps - k, r);
  } catch (const std::exception& e) {
    r.error = "load_checkpoint raised: " + first_line(e.what());
    r.error_step = 0;
  }
  if (!r.ran()) return r;
  const std::vector<double> tail(s.losses.begin() + k, s.losses.end());
  const auto i = first_difference(tail, r.losses);
  const bool params_equal = r.end.defined() && s.end.defined() && r.end.sizes() == s.end.sizes() && torch::equal(r.end, s.end);
  mine["resume"] = {{"bitwise", !i && params_equal}};
  if (i) mine["resume"]["losses"] = describe_curve_difference(tail, r.losses, *i) + " (steps from " + std::to_string(k) + ")";
  if (!params_equal) {
    mine["resume"]["parameters"] = r.end.sizes() == s.end.sizes() ? "max |diff| " + sci(max_abs_diff(r.end, s.end))
                                                                   : std::string("other sizes");
  }
  return r;
}

// --- the promises, judged by rank 0 over every rank's record ------------------------------------

void matches_ddp(const Gathered& g, Findings& out) {
  std::vector<std::string> errors;
  double deviation = 0.0;
  std::string worst;
  bool judged = true;
  for (const json& rj : g.ranks) {
    if (rj.contains("ddp_missing")) {
      judged = false;
      continue;
    }
    if (rj["fsdp"].contains("error")) {
      errors.push_back(who(rj) + ": the sharded run raised at step " + std::to_string(rj["fsdp"]["error"]["step"].get<int64_t>()) +
                       ": " + rj["fsdp"]["error"]["what"].get<std::string>());
      continue;
    }
    if (rj["ddp"].contains("error")) {
      judged = false;
      continue;
    }
    const json& v = rj["vs_ddp"];
    if (v.contains("start_differs")) {
      errors.push_back(who(rj) + ": sharded and DDP runs from the same seed start from other parameters (max |diff| " +
                       sci(v["start_differs"].get<double>()) + ")");
      continue;
    }
    const double dev = v["deviation"];
    if (dev >= deviation) {
      deviation = dev;
      worst = who(rj) + ": largest loss difference " + sci(v["loss_rel_max"].get<double>()) + " relative (" +
              fmt::sig(v["loss_rel_max"].get<double>() / g.u, 3) + "u, step " + std::to_string(v["worst_step"].get<int64_t>()) +
              " the worst against its bound), update difference " + sci(v["update_rel"].get<double>()) + " of the update (" +
              fmt::sig(v["update_rel"].get<double>() / g.u, 3) + "u)";
    }
  }
  const std::string bound = "bound (t+1)*eps per step t, T*eps for the update, eps = sqrt(n)u = " + sci(g.eps) +
                            " with n = " + fmt::sig(g.n_elements, 6) + " parameter elements";
  if (!errors.empty()) {
    out.broken("matches_ddp", fmt::first_items(errors, 2), std::numeric_limits<double>::infinity(), 1.0);
  } else if (!judged) {
    const json& r0 = g.ranks[0];
    const std::string why = r0.contains("ddp_missing") ? r0["ddp_missing"].get<std::string>()
                                                       : "the DDP run raised: " + r0["ddp"]["error"].value("what", std::string("?"));
    out.recorded("matches_ddp", "not judged: no DDP run to compare with (" + why + ")");
  } else if (deviation <= 1.0) {
    out.held("matches_ddp", "sharded vs DDP over " + g.legs_note + ", worst " + worst + " (" + bound + ")", deviation, 1.0);
  } else {
    out.broken("matches_ddp", "sharded training differs from DDP beyond rounding (" + bound + "): " + worst, deviation, 1.0);
  }
}

// Each rank's ShardBytes: at most 1/N of each part plus a row per tensor, and no foreign tensor stepped.
void shards_one_over_n(const Gathered& g, Findings& out) {
  std::vector<std::string> broken;
  std::string measured;
  for (const json& r : g.ranks) {
    if (!r.contains("bytes")) {
      broken.push_back("rank " + std::to_string(r.value("rank", -1)) + ": " + r.value("bytes_error", std::string("not measured")));
      continue;
    }
    const json& b = r["bytes"];
    const int rank = r["rank"];
    for (const char* part : {"parameters", "gradients", "optimizer_state"}) {
      const json& a = b[part];
      const std::string what = std::string(part) == "optimizer_state" ? "optimizer state" : part;
      const int64_t local = a["local_bytes"], full = a["full_bytes"], rows = a["row_bytes"], n = a["tensors"];
      if (n == 0) continue;  // nothing of this part (no gradient kept after the step): not counted
      const int64_t bound = full / g.world + rows;
      if (rank == 0) {
        measured += std::string(measured.empty() ? "" : ", ") + what + " " + bytes_text(local) + " of " + bytes_text(full) +
                    " (bound " + bytes_text(bound) + ")";
      }
      if (local > bound) {
        std::string s = "rank " + std::to_string(rank) + " holds " + bytes_text(local) + " of " + what + " whose whole is " +
                        bytes_text(full) + " (" + fmt::sig(100.0 * local / std::max<int64_t>(full, 1), 3) + "%), more than 1/" +
                        std::to_string(g.world) + " plus a row per tensor (" + bytes_text(bound) + ")";
        if (std::string(part) == "parameters" && !b["unsharded"].empty()) {
          s += "; not sharded: " + fmt::first_items(b["unsharded"].get<std::vector<std::string>>(), 4);
        }
        broken.push_back(s);
      }
    }
    const json& foreign = b["foreign_parameters"];
    if (foreign["tensors"].get<int64_t>() > 0) {
      broken.push_back("rank " + std::to_string(rank) + "'s optimizer updates " + std::to_string(foreign["tensors"].get<int64_t>()) +
                       " tensor(s) (" + bytes_text(foreign["local_bytes"]) +
                       ") that are not the model's parameters: the model trains other tensors than the optimizer "
                       "steps (an optimizer made before fully_shard holds the unsharded originals, whole)");
    }
  }
  if (!out.broken_if_any("shards_one_over_n", broken, 4)) {
    out.held("shards_one_over_n", "after the first step, rank 0 holds " + measured + " (bound: 1/" + std::to_string(g.world) +
                                      " of the whole plus one dim-0 row per tensor, per part); every rank within it, and "
                                      "the optimizer steps the model's own parameters");
  }
}

// Why the checkpoint's promises cannot be judged ("" when they can): a run raised before the save,
// or the save itself did (then checkpoint_loads_bare is broken).
std::string checkpoint_not_judged(const Gathered& g, Findings& out) {
  for (const json& rj : g.ranks) {
    std::string why;
    if (rj["fsdp"].contains("error")) {
      why = "not judged: " + who(rj) + "'s sharded run raised before the save (matches_ddp's finding)";
    } else if (rj["saved"].contains("error") && rj["saved"]["error"]["step"].get<int64_t>() < g.k) {
      why = "not judged: " + who(rj) + "'s run raised before the save, at step " +
            std::to_string(rj["saved"]["error"]["step"].get<int64_t>()) + ": " + rj["saved"]["error"]["what"].get<std::string>();
    }
    if (!why.empty()) {
      for (const char* p : {"checkpoint_loads_bare", "resume_bitwise", "rank0_writes"}) out.recorded(p, why);
      return why;
    }
  }
  for (const json& rj : g.ranks) {
    if (rj.contains("save_error")) {
      const std::string e = who(rj) + "'s save_checkpoint raised: " + rj["save_error"].get<std::string>();
      out.broken("checkpoint_loads_bare", e);
      out.recorded("resume_bitwise", "not judged: no checkpoint (" + e + ")");
      out.recorded("rank0_writes", "not judged: the save did not complete");
      return e;
    }
  }
  return "";
}

void checkpoint_loads_bare(const Gathered& g, Findings& out) {
  const json& bare = g.ranks[0]["bare"];
  const std::string saved = "the checkpoint saved after " + std::to_string(g.k) + " sharded steps";
  if (bare.contains("ok")) {
    out.held("checkpoint_loads_bare", saved + " " + bare["ok"].get<std::string>());
  } else if (bare.contains("broken")) {
    out.broken("checkpoint_loads_bare", saved + ": " + bare["broken"].get<std::string>());
  } else {
    out.recorded("checkpoint_loads_bare", "not judged: " + bare.value("recorded", std::string("?")));
  }
}

void resume_bitwise(const Gathered& g, Findings& out) {
  std::vector<std::string> broken;
  for (const json& rj : g.ranks) {
    if (rj["resumed"].contains("error")) {
      broken.push_back(who(rj) + ": the resumed run " + rj["resumed"]["error"]["what"].get<std::string>());
    } else if (rj.contains("resume") && !rj["resume"]["bitwise"].get<bool>()) {
      std::string s = who(rj) + ": resumed differs from the run that saved";
      if (rj["resume"].contains("losses")) s += "; losses: " + rj["resume"]["losses"].get<std::string>();
      if (rj["resume"].contains("parameters")) s += "; final parameters: " + rj["resume"]["parameters"].get<std::string>();
      broken.push_back(s);
    } else if (rj["saved"].contains("error")) {
      broken.push_back(who(rj) + ": the run that saved raised after the save at step " +
                       std::to_string(rj["saved"]["error"]["step"].get<int64_t>()) + ": " +
                       rj["saved"]["error"]["what"].get<std::string>());
    }
  }
  if (!out.broken_if_any("resume_bitwise", broken)) {
    out.held("resume_bitwise", "a fresh sharded run loaded the checkpoint of step " + std::to_string(g.k) + " and its " +
                                   std::to_string(g.steps - g.k) +
                                   " losses and final whole parameters are bitwise the saving run's, on every rank");
  }
}

void rank0_writes(const Gathered& g, Findings& out) {
  const json writes = g.ranks[0].value("writes", json::object());
  std::vector<std::string> twice, names;
  for (const auto& [name, n] : writes.items()) {
    names.push_back("'" + name + "'");
    if (n.get<int>() > 1) twice.push_back("'" + name + "' written " + std::to_string(n.get<int>()) + " times");
  }
  if (names.empty()) {
    out.recorded("rank0_writes", "not judged: the save wrote no file directly in the checkpoint's directory (a "
                                 "checkpoint directory of the recipe's own?)");
  } else if (twice.empty()) {
    out.held("rank0_writes", "the save wrote each file once (" + fmt::first_items(names, names.size()) + ") with " +
                                 std::to_string(g.world) + " ranks");
  } else {
    out.broken("rank0_writes", "one save by " + std::to_string(g.world) + " ranks: " + fmt::first_items(twice, twice.size()) +
                                   ": every rank wrote it, not rank 0 alone (ranks overwrite each other's file)");
  }
}

// Leaves the process group when the check is done, however it ends (every rank reaches it).
struct LeaveGroup {
  DataParallelProbe& probe;
  ~LeaveGroup() {
    try {
      probe.leave_process_group();
    } catch (...) {  // a rank already gone: nothing left to tear down in order
    }
  }
};

// One rank: the four legs (F sharded, D replicated, S saving at k, R resumed from S), then rank 0
// gathers every rank's record and judges the promises.
CheckResult check_fsdp(const CheckContext& ctx) {
  auto first = fresh_run_with<DataParallelProbe>(ctx, kInterface, kWhy);
  DataParallelProbe& probe = *first.probe;
  probe.set_data_parallel("fsdp");  // skips a recipe that does not declare the mode
  const auto [rank, world] = probe.join_process_group(ctx.device);
  const LeaveGroup leave{probe};
  if (world != ctx.world.size) {
    throw HarnessError("the recipe's process group has " + std::to_string(world) + " ranks, the launcher started " +
                       std::to_string(ctx.world.size));
  }
  const RunOptions options = run_options(ctx, ctx.seed);
  const std::string dir = ctx.work_dir + "/" + ctx.recipe;
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/fsdp-checkpoint.pt";
  const auto t0 = std::chrono::steady_clock::now();
  json mine = {{"rank", rank}};

  Run& f_run = *first.run;
  f_run.setup(options);
  Gathered g;
  g.world = world;
  g.steps = 2 * f_run.steps_per_epoch();
  g.k = f_run.steps_per_epoch() + 1;
  const Leg f = observe_sharded(f_run, probe, g.steps, mine);
  g.n_elements = f.start.defined() ? static_cast<double>(f.start.numel()) : 0.0;
  g.u = unit_roundoff_of(f_run.parameters().empty() ? c10::kFloat : f_run.parameters().front().second.scalar_type());
  g.eps = std::sqrt(std::max(g.n_elements, static_cast<double>(world))) * g.u;
  const Leg d = observe_ddp(ctx, options, g.steps, mine);
  Leg s, r;
  if (f.ran()) s = observe_save(ctx, options, g.steps, g.k, dir, path, mine);
  if (s.ran() && f.ran() && !mine.contains("save_error")) r = observe_resume(ctx, options, g.steps, g.k, path, s, mine);
  mine["ddp"] = leg_json(d);
  mine["fsdp"] = leg_json(f);
  mine["saved"] = leg_json(s);
  mine["resumed"] = leg_json(r);
  mine["vs_ddp"] = compare_with_ddp(d, f, g.eps);
  mine["wall_s"] = seconds_since(t0);

  const std::vector<std::string> texts = probe.all_gather_text(mine.dump());
  if (rank != 0) {
    throw SkipCell("rank " + std::to_string(rank) + " of " + ctx.world.label + ": records sent to rank 0, which judges this cell");
  }
  for (const std::string& t : texts) g.ranks.push_back(json::parse(t));
  g.legs_note = std::to_string(g.steps) + " steps (two epochs) on " + ctx.world.label;

  Findings out;
  out.metrics() = {{"world_size", world}, {"steps", g.steps}, {"resume_at", g.k}, {"eps", g.eps}, {"eps_in_u", g.eps / g.u},
                   {"parameter_elements", g.n_elements}, {"ranks", g.ranks}};
  matches_ddp(g, out);
  shards_one_over_n(g, out);
  if (checkpoint_not_judged(g, out).empty()) {
    checkpoint_loads_bare(g, out);
    resume_bitwise(g, out);
    rank0_writes(g, out);
  }
  out.metrics()["wall_s"] = seconds_since(t0);
  return out.result(ctx.world.label + ", sharded (fully_shard) vs DDP, two epochs:");
}

void require_probe(const CheckContext& ctx) {
  auto r = fresh_run_with<DataParallelProbe>(ctx, kInterface, kWhy);
  r.probe->set_data_parallel("fsdp");
}

}  // namespace
}  // namespace tc

namespace tc {
TC_CHECK(fsdp,
         "under torchrun: sharded (FSDP) training matches DDP; each rank holds about 1/N of parameters, "
         "gradients and optimizer state; the checkpoint loads into a bare model, resumes bitwise, and is "
         "written by rank 0 alone")
    ->Promise("matches_ddp", "sharded losses and update within (t+1)*sqrt(n)u of DDP's over two epochs")
    ->Promise("shards_one_over_n", "each rank holds at most 1/N (plus a row per tensor) of parameters, gradients, "
                                   "optimizer state; the optimizer steps the model's own parameters")
    ->Promise("checkpoint_loads_bare", "the checkpoint loads strictly into a bare, unsharded model with the whole parameters")
    ->Promise("resume_bitwise", "a sharded run resumed from the checkpoint continues bitwise")
    ->Promise("rank0_writes", "each file of a save written once, not once per rank")
    ->MultiProcess(2)
    ->Preflight(tc::require_probe)
    ->Languages({"python"}, tc::kWhy)
    ->Timeout(600);
}  // namespace tc
