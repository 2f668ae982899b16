// distributed: data-parallel training under torchrun with c10d. A multi-process check: the runner
// launches torchrun on the torchconform binary for each cell (2 ranks with Gloo on the CPU, one rank
// per GPU with NCCL on CUDA; harness/multi_process.h), and this file is the worker; a user may start
// `torchconform run --check distributed ...` under a torchrun of their own instead. Every rank runs the recipe's distributed training twice from the same seed and
// records what it saw; rank 0 gathers the records over the store and judges:
//
//   - gradients: after all-reduce, the step-0 gradients of every rank equal the gradients the check
//     computes itself in one process on the concatenated batch (the recipe's bare model loaded with
//     the step's parameters, its training loss, the check's backward); an empty list fails (float32 sums in another order: tolerance 1e-4 of each tensor's
//     largest |gradient|; sums here have at most 16 samples x 64 positions = 1024 terms, whose
//     reordering error is bounded by about 1024 * 2^-24 = 6e-5 relative to the sum of |terms|);
//   - replicas: every rank's parameters bitwise identical after every step;
//   - sampler: over each epoch every sample seen exactly once across ranks; the order changes
//     with the epoch; the same seed repeats the order (second run, fresh objects);
//   - writes: in each save (and the report) every file is written once, not once per rank (rank
//     0's inotify watch on the output directory counts renames onto and closes of each name);
//   - after save_checkpoint returns, every rank loads the checkpoint's model into a bare model and
//     finds its own parameters, and (ranks on one host) returned after the file was renamed in.
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <map>
#include <set>

#include <torch/torch.h>

#include "harness/contract/state_probes.h"
#include "harness/util/posix_fs.h"
#include "harness/util/text_format.h"
#include "suites/support/write_watch.h"
#include "suites/distributed/judge.h"
#include "suites/support/fingerprint.h"
#include "suites/support/kit.h"
#include "suites/support/tensor_compare.h"
#include "reference/checkpoint.h"
#include "reference/distributed_run.h"

namespace tc {
namespace {

using nlohmann::json;
namespace dist = ref::dist;

using distributed::kEpochs;
using distributed::kGradRelTolerance;
using distributed::assess_ranks;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

std::string digest(const NamedTensors& tensors) { return parameters_digest(tensors).substr(0, 16); }

int64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

using fmt::first_line;

// The check's own gradients: a bare model loaded with the step's starting parameters, the recipe's
// training loss on the whole batch (every rank's part), backpropagated here in one process.
// Throws std::runtime_error naming what does not fit (a parameter the model does not have).
NamedTensors own_gradients(tc::DistributedRecipe& d, const NamedTensors& p0, const at::Tensor& x,
                           const at::Tensor& y, const c10::Device& device) {
  std::shared_ptr<torch::nn::Module> m = d.bare_model();
  {
    torch::NoGradGuard no_grad;
    auto named = m->named_parameters();
    if (named.size() != p0.size()) {
      throw std::runtime_error("the bare model has " + std::to_string(named.size()) + " parameters, the run " +
                               std::to_string(p0.size()));
    }
    for (const auto& [name, value] : p0) {
      at::Tensor* p = named.find(name);
      if (p == nullptr) throw std::runtime_error("the bare model has no parameter '" + name + "'");
      p->copy_(value);
    }
  }
  m->to(device);
  m->train();
  m->zero_grad(/*set_to_none=*/true);
  d.training_loss(*m, x, y).backward();
  NamedTensors out;
  for (const auto& p : m->named_parameters()) {
    if (!p.value().grad().defined()) throw std::runtime_error("the training loss does not depend on '" + p.key() + "'");
    out.emplace_back(p.key(), p.value().grad().detach().to(torch::kCPU).clone());
  }
  return out;
}

// Step-0 gradients of every rank (after averaging) against the check's own on the whole batch.
// "max_rel_diff" where every parameter has a gradient from every rank; otherwise "problem".
json compare_gradients(tc::DistributedRecipe& d, dist::ProcessGroup& pg, const NamedTensors& p0,
                       const c10::Device& device) {
  std::pair<at::Tensor, at::Tensor> batch;
  try {
    batch = d.last_batch();
  } catch (const ProbeNotProvided& e) {  // every rank alike: no collective is left waiting
    return pg.rank() == 0 ? json{{"not_comparable", "the recipe gives no last batch (" + first_line(e.what()) + ")"}}
                          : json::object();
  }
  auto [x, y] = batch;
  const NamedTensors grads = d.last_gradients();
  const std::vector<at::Tensor> xs = pg.all_gather(x.to(device));
  const std::vector<at::Tensor> ys = pg.all_gather(y.to(device));
  std::vector<std::vector<at::Tensor>> per_tensor;  // [tensor][rank]
  for (const auto& [name, g] : grads) per_tensor.push_back(pg.all_gather(g.to(device).contiguous()));
  if (pg.rank() != 0) return json::object();
  json j = {{"tolerance_rel", kGradRelTolerance}, {"batch", torch::cat(xs).size(0)}};
  NamedTensors want;
  try {
    if (auto* model_probe = dynamic_cast<tc::DistributedModelProbe*>(&d)) {
      // A model that is not a LibTorch module (a Python recipe): the same computation, in its language.
      OneProcessGradients one = model_probe->one_process_gradients(p0, torch::cat(xs), torch::cat(ys));
      if (!one.not_comparable.empty()) {
        j["not_comparable"] = one.not_comparable;
        return j;
      }
      want = std::move(one.gradients);
    } else {
      want = own_gradients(d, p0, torch::cat(xs), torch::cat(ys), device);
    }
  } catch (const std::exception& e) {
    j["problem"] = std::string("the check could not compute its own gradients: ") + first_line(e.what());
    return j;
  }
  if (grads.empty()) {
    j["problem"] = "the recipe reported no gradients (last_gradients() is empty)";
    return j;
  }
  double worst = 0.0;
  std::string worst_where;
  for (const auto& [name, expected] : want) {
    size_t t = 0;
    while (t < grads.size() && grads[t].first != name) ++t;
    if (t == grads.size()) {
      j["problem"] = "the recipe reported no gradient for '" + name + "'";
      return j;
    }
    const double scale = expected.abs().max().item<double>();
    for (size_t r = 0; r < per_tensor[t].size(); ++r) {
      const at::Tensor got = per_tensor[t][r].cpu();
      if (got.sizes() != expected.sizes()) {
        j["problem"] = "rank " + std::to_string(r) + "'s gradient of '" + name + "' has shape " +
                       c10::str(got.sizes()) + ", the parameter " + c10::str(expected.sizes());
        return j;
      }
      const double rel = max_abs_diff(got, expected) / (scale > 0 ? scale : 1.0);
      if (rel > worst || worst_where.empty()) {
        worst = rel;
        worst_where = "'" + name + "' on rank " + std::to_string(r);
      }
    }
  }
  j["max_rel_diff"] = worst;
  j["where"] = worst_where;
  return j;
}

// One save (or report) observed: everyone enters together, then each rank loads what the call
// returned, then everyone has left it.
json observe_write(tc::DistributedRecipe& d, dist::ProcessGroup& pg, WriteWatch* watch, bool checkpoint) {
  pg.barrier();
  if (watch) watch->drain();  // writes before this call are not its
  const std::string path = checkpoint ? d.save_checkpoint() : d.write_report();
  json o = {{"returned_ns", realtime_ns()}, {"path", path}};
  if (checkpoint) {
    try {
      NamedTensors loaded;
      if (auto* bare_probe = dynamic_cast<BareModelProbe*>(&d)) {
        // A model that is not a LibTorch module (a Python recipe): its bare model, its file format.
        BareModelLoad l = bare_probe->load_into_bare_model(path);
        if (l.outcome != BareModelLoad::Outcome::kLoaded) {
          throw std::runtime_error(l.outcome == BareModelLoad::Outcome::kRefused
                                       ? "does not load strictly into a bare model: " + l.detail
                                       : "its model state cannot be found: " + l.detail);
        }
        loaded = std::move(l.parameters);
      } else {
        std::shared_ptr<torch::nn::Module> bare = d.bare_model();
        ref::load_model_part_strict(*bare, path);
        for (const auto& p : bare->named_parameters()) loaded.emplace_back(p.key(), p.value());
      }
      auto diff = first_tensor_difference(snapshot(d.parameters()), snapshot(loaded));
      o["load"] = diff ? "the checkpoint holds other weights than this rank's ('" + diff->name + "')" : "ok";
    } catch (const ProbeNotProvided& e) {
      o["load"] = "ok";  // nothing to load it into: recorded, not judged
      o["load_not_judged"] = first_line(e.what());
    } catch (const std::exception& e) {
      o["load"] = first_line(e.what());
    }
  }
  pg.barrier();
  if (watch) {
    o["writes"] = watch->drain();
    struct stat st {};
    if (!path.empty() && stat(path.c_str(), &st) == 0) {
      o["ctime_ns"] = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
    }
  }
  return o;
}

// This rank's part: two runs of the recipe from the same seed, everything observed.
json observe_runs(const CheckContext& ctx, const tc::DistributedProvider& provider, dist::ProcessGroup& pg,
                  const std::string& base, const c10::Device& device) {
  json runs = json::array();
  for (int k = 0; k < 2; ++k) {
    const std::string dir = base + "/run" + std::to_string(k);
    if (pg.rank() == 0) posix_fs::make_dirs(dir);
    pg.barrier();
    std::unique_ptr<WriteWatch> watch;
    if (pg.rank() == 0) watch = std::make_unique<WriteWatch>(dir);
    std::unique_ptr<tc::DistributedRecipe> d = provider.make_distributed();
    d->setup({device, ctx.seed, ctx.quick, dir}, pg);
    const NamedTensors p0 = snapshot(d->parameters());
    const int64_t spe = d->steps_per_epoch();
    json run = {{"steps", json::array()}, {"saves", json::array()}, {"steps_per_epoch", spe},
                {"dataset_size", d->dataset_size()}};
    for (int64_t s = 0; s < spe * kEpochs; ++s) {
      const tc::DistStep r = d->train_step();
      run["steps"].push_back({{"epoch", r.epoch}, {"samples", r.samples}, {"loss", r.loss},
                              {"params", digest(d->parameters())}});
      if (k == 0 && s == 0) run["gradients"] = compare_gradients(*d, pg, p0, device);
      if ((s + 1) % spe == 0) run["saves"].push_back(observe_write(*d, pg, watch.get(), true));
    }
    run["report"] = observe_write(*d, pg, watch.get(), false);
    run["final_params"] = digest(d->parameters());
    runs.push_back(run);
  }
  return runs;
}

// This rank's part of a resume: n steps straight, against k steps + save + new objects on every
// rank + load + n - k steps (k mid-epoch, n across the next epoch boundary): losses and parameters
// of every rank must be bitwise those of the straight run.
json observe_resume(const CheckContext& ctx, const tc::DistributedProvider& provider, dist::ProcessGroup& pg,
                    const std::string& base, const c10::Device& device) {
  const std::string dir = base + "/resume";
  if (pg.rank() == 0) posix_fs::make_dirs(dir);
  pg.barrier();
  std::unique_ptr<tc::DistributedRecipe> straight = provider.make_distributed();
  straight->setup({device, ctx.seed, ctx.quick, dir}, pg);
  const int64_t spe = straight->steps_per_epoch();
  const int64_t k = spe + std::max<int64_t>(1, spe / 2), n = 2 * spe + 1;
  json o = {{"resume_at", k}, {"steps", n}, {"straight_losses", json::array()}, {"resumed_losses", json::array()}};
  std::string path;
  for (int64_t s = 0; s < n; ++s) {
    o["straight_losses"].push_back(straight->train_step().loss);
    if (s + 1 == k) path = straight->save_checkpoint();
  }
  o["straight_params"] = digest(straight->parameters());
  straight.reset();
  pg.barrier();
  std::unique_ptr<tc::DistributedRecipe> resumed = provider.make_distributed();
  resumed->setup({device, ctx.seed, ctx.quick, dir}, pg);
  try {
    resumed->load_checkpoint(path);
  } catch (const dist::PeerLost&) {
    throw;
  } catch (const std::exception& e) {
    o["error"] = "load_checkpoint('" + path + "') threw: " + first_line(e.what());
  }
  pg.barrier();  // a rank whose load threw still takes the steps: its peers' collectives need it
  for (int64_t s = k; s < n; ++s) o["resumed_losses"].push_back(resumed->train_step().loss);
  o["resumed_params"] = digest(resumed->parameters());
  return o;
}

ProbedRun<tc::DistributedProvider> provider_of(const CheckContext& ctx) {
  return fresh_run_with<tc::DistributedProvider>(ctx, "tc::DistributedProvider (harness/contract/distributed_probe.h)",
                                                 "its data-parallel training cannot be checked");
}

// Before torchrun is launched: the recipe provides its DDP training (a Python recipe's make_distributed()
// says here when it has none, rather than in every rank).
void require_provider(const CheckContext& ctx) { provider_of(ctx).probe->make_distributed(); }

CheckResult run_worker(const CheckContext& ctx, const dist::LaunchEnv& env) {
  const ProbedRun<tc::DistributedProvider> probed = provider_of(ctx);
  const tc::DistributedProvider* provider = probed.probe;
  const bool cuda = ctx.device == "cuda";
  dist::GroupOptions go;
  go.backend = cuda ? dist::Backend::kNccl : dist::Backend::kGloo;
  go.timeout = std::chrono::milliseconds(std::stoll(env_or("TORCHCONFORM_DIST_TIMEOUT_MS", "60000")));
  std::shared_ptr<dist::ProcessGroup> pg = dist::ProcessGroup::create(env, go);
  const c10::Device device = cuda ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank))
                                  : c10::Device(c10::kCPU);
  const std::string base = ctx.work_dir + "/" + ctx.recipe;
  const json mine = {{"runs", observe_runs(ctx, *provider, *pg, base, device)},
                    {"resume", observe_resume(ctx, *provider, *pg, base, device)}};
  pg->store_set("tc/observations/" + std::to_string(pg->rank()), mine.dump());
  if (pg->rank() != 0) {
    throw SkipCell("rank " + std::to_string(pg->rank()) + " of " + ctx.world.label +
                   ": observations sent to rank 0, which judges this cell");
  }
  std::vector<json> all;
  for (int r = 0; r < pg->size(); ++r) {
    all.push_back(r == 0 ? mine : json::parse(pg->store_get("tc/observations/" + std::to_string(r))));
  }
  CheckResult result = assess_ranks(all, ctx.world);
  result.metrics["backend"] = dist::backend_name(go.backend);
  return result;
}

// One rank of the cell (the runner launched torchrun, or the user did): rank 0 returns the verdict.
CheckResult check_distributed(const CheckContext& ctx) {
  std::optional<dist::LaunchEnv> env;
  try {
    env = dist::LaunchEnv::from_environment();
  } catch (const std::invalid_argument& e) {
    throw HarnessError(e.what());
  }
  if (!env) throw HarnessError("the distributed check runs as torchrun's workers (RANK and WORLD_SIZE unset)");
  return run_worker(ctx, *env);
}

}  // namespace
}  // namespace tc

namespace tc {
TC_CHECK(distributed,
         "under torchrun with c10d: DDP gradients equal one process on the whole batch; replicas "
              "identical after every step; each sample once per epoch across ranks, order changes with "
              "set_epoch and repeats; only rank 0 writes; after save and barrier every rank loads the "
              "checkpoint into a bare model")
    ->Promise("ddp_gradients", "DDP gradients equal one process on the whole batch")
    ->Promise("replicas_identical", "replicas identical after every step")
    ->Promise("sampler", "each sample once per epoch across ranks; order changes with set_epoch and repeats")
    ->Promise("rank0_writes", "only rank 0 writes")
    ->Promise("checkpoint_loads_unwrapped", "after save and barrier every rank loads the checkpoint into a bare model")
    ->Promise("resume_every_rank", "training resumes from a checkpoint on every rank: each rank's losses and "
                                   "parameters bitwise its straight run's")
    ->MultiProcess(2)
    ->Preflight(tc::require_provider)
    ->Timeout(600);
}  // namespace tc
