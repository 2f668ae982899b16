#include "harness/runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <map>
#include <mutex>
#include <optional>

#include "harness/cell_in_child.h"
#include "harness/contract/run.h"
#include "harness/contract/sanity.h"
#include "harness/recipe_process.h"
#include "harness/util/breadcrumb.h"
#include "harness/util/forking.h"
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/DefaultDtype.h>
#include <c10/util/typeid.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>

#include "harness/multi_process.h"

namespace tc {
namespace {

// An error's message without the C++ backtrace LibTorch appends to what() ("Exception raised from
// ... (most recent call first):" and a frame list), at most its first few lines.
std::string error_text(const std::exception& e) {
  std::string text;
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) {
    text = c10_error->what_without_backtrace();
  } else {
    text = e.what();
  }
  // Also where a c10::Error's what() was copied into another exception's message.
  const size_t trace = text.find("Exception raised from ");
  if (trace != std::string::npos) text.erase(trace);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  constexpr int kMaxLines = 4;
  size_t pos = 0;
  for (int line = 1; line <= kMaxLines; ++line) {
    const size_t newline = text.find('\n', pos);
    if (newline == std::string::npos) break;
    if (line == kMaxLines) text = text.substr(0, newline) + "\n(...)";
    pos = newline + 1;
  }
  return text;
}

// The detection `check` declares for an error with this message, or null.
const ThrownDetection* declared_detection(const CheckInfo& check, const std::string& message) {
  for (const ThrownDetection& d : check.detects_by_throwing) {
    if (!d.message_contains.empty() && message.find(d.message_contains) != std::string::npos) return &d;
  }
  return nullptr;
}

// The ids of the promises that broke in a check's structured findings (metrics.promises).
std::vector<std::string> broken_ids(const nlohmann::json& metrics) {
  std::vector<std::string> ids;
  if (!metrics.is_object() || !metrics.contains("promises") || !metrics["promises"].is_array()) return ids;
  for (const nlohmann::json& p : metrics["promises"]) {
    if (p.is_object() && p.value("status", "") == "broken") ids.push_back(p.value("id", ""));
  }
  return ids;
}

// A broken promise that the check registered.
bool breaks_a_registered_promise(const CheckInfo& check, const nlohmann::json& metrics) {
  for (const std::string& id : broken_ids(metrics)) {
    for (const PromiseInfo& registered : check.promises) {
      if (registered.id == id) return true;
    }
  }
  return false;
}

std::string join_ids(const std::vector<std::string>& ids) {
  std::string s;
  for (const std::string& id : ids) s += (s.empty() ? "" : ", ") + id;
  return s;
}

// A targeted variant that declares the promises it breaks (->Breaks) and broke none of them was
// caught by another promise alone: the promise it breaks lost its teeth. One that declares none is
// caught only by a promise that is not a timing promise: a time measurement breaks with the
// machine's speed and load too, so it never stands alone as the proof that a check has teeth.
// "" where it is a catch.
std::string caught_by_another(const RecipeInfo& recipe, const CheckInfo& check, const nlohmann::json& metrics) {
  const std::vector<std::string> broken = broken_ids(metrics);
  const std::vector<std::string>* declared = recipe.declared_breaks(check.name);
  if (declared == nullptr) {
    for (const std::string& id : broken) {
      const auto p = std::find_if(check.promises.begin(), check.promises.end(),
                                  [&](const PromiseInfo& registered) { return registered.id == id; });
      if (p == check.promises.end() || !p->timing) return "";
    }
    return "caught only by the timing promise(s) " + join_ids(broken) +
           ", which the machine's speed can break too; it declares no promise it breaks (->Breaks): not a catch\n";
  }
  for (const std::string& id : broken) {
    if (std::find(declared->begin(), declared->end(), id) != declared->end()) return "";
  }
  return "caught only by " + join_ids(broken) + ", not by the promise it breaks (" + join_ids(*declared) +
         "), which held: missed by its own promise\n";
}

constexpr const char* kNotACatch = "failed without breaking a targeted promise (not a catch): ";

template <typename Info>
std::vector<const Info*> select(const std::vector<Info>& all, const std::vector<std::string>& names,
                                const char* kind) {
  std::vector<const Info*> out;
  if (names.empty()) {
    for (const Info& i : all) out.push_back(&i);
    return out;
  }
  for (const std::string& n : names) {
    auto it = std::find_if(all.begin(), all.end(), [&](const Info& i) { return i.name == n; });
    if (it == all.end()) {
      std::string known;
      for (const Info& i : all) known += (known.empty() ? "" : ", ") + i.name;
      throw std::invalid_argument(std::string("unknown ") + kind + " '" + n + "' (known: " + known +
                                  ")");
    }
    if (std::find(out.begin(), out.end(), &*it) == out.end()) out.push_back(&*it);
  }
  return out;
}

// Every check x recipe x device of the plan's selection, in plan order.
template <typename F>
void for_each_selected(const Registry& registry, const RunPlan& plan, F f) {
  const auto checks = select(registry.checks(), plan.checks, "check");
  const auto recipes = select(registry.recipes(), plan.recipes, "recipe");
  for (const DeviceSlot& d : plan.devices) {
    for (const CheckInfo* c : checks) {
      for (const RecipeInfo* r : recipes) f(c, r, d);
    }
  }
}

}  // namespace

std::vector<PlannedCell> plan_cells(const Registry& registry, const RunPlan& plan) {
  std::vector<PlannedCell> cells;
  for_each_selected(registry, plan, [&](const CheckInfo* c, const RecipeInfo* r, const DeviceSlot& d) {
    if (!c->judges_language(r->language_name())) return;  // no cell: it cannot apply (->Languages)
    if (!r->is_variant()) {
      cells.push_back({c, r, d});
    } else if (c->covers_variants &&
               (!plan.judged_only || r->targets_check(c->name))) {
      cells.push_back({c, r, d});
    }
  });
  return cells;
}

std::vector<NotApplicable> not_applicable_cells(const Registry& registry, const RunPlan& plan) {
  std::vector<NotApplicable> out;
  for_each_selected(registry, plan, [&](const CheckInfo* c, const RecipeInfo* r, const DeviceSlot& d) {
    if (!c->judges_language(r->language_name())) out.push_back({c->name, r->name, d.name, c->languages_why});
  });
  return out;
}

namespace {

// What the check gets for this cell.
CheckContext context_for(const Cell& cell, const PlannedCell& planned, const RunPlan& plan) {
  CheckContext ctx;
  ctx.check = cell.check;
  ctx.recipe = cell.recipe;
  ctx.device = cell.device;
  ctx.seed = plan.seed;
  ctx.quick = plan.quick;
  ctx.sweep = plan.sweep;
  ctx.no_sweep = plan.no_sweep;
  ctx.role = cell.role;
  ctx.cuda_present = plan.cuda_present;
  ctx.make_run = planned.recipe->make;
  ctx.work_dir = plan.work_dir;
  ctx.recipe_is_variant = planned.recipe->is_variant();
  ctx.expected = cell.expected;
  ctx.part = plan.part;
  if (!planned.recipe->load_spec.empty()) ctx.python_specs = {planned.recipe->load_spec};
  if (planned.check->multi_process()) ctx.world = world_for(*planned.check, cell.device);
  if (!plan.executable.empty() && plan.part.empty()) {
    ctx.in_fresh_process = [exe = plan.executable, c = ctx](const std::string& part) {
      return run_part_in_fresh_process(exe, c, part);
    };
  }
  return ctx;
}

// The verdict on what the check returned.
void judge_returned(Cell& cell, const PlannedCell& planned, CheckResult result) {
  cell.outcome = result.outcome;
  cell.evidence = std::move(result.evidence);
  cell.metrics = std::move(result.metrics);
  cell.verdict = judge(cell.expected, cell.outcome, cell.role);
  if (cell.outcome == Outcome::kNone) cell.evidence = "check returned no outcome: " + cell.evidence;
  // A targeted variant is caught only by a promise of the check breaking, never by a failure
  // that names none (a bug in the check, a timeout, a driver error would read as a catch).
  if (cell.expected == Expected::kFail && cell.outcome == Outcome::kFail &&
      !breaks_a_registered_promise(*planned.check, cell.metrics)) {
    cell.verdict = Verdict::kError;
    cell.evidence = kNotACatch + cell.evidence;
  } else if (cell.expected == Expected::kFail && cell.outcome == Outcome::kFail) {
    const std::string other = caught_by_another(*planned.recipe, *planned.check, cell.metrics);
    if (!other.empty()) {
      cell.verdict = Verdict::kMissed;
      cell.evidence = other + cell.evidence;
    }
  }
}

// The verdict when the recipe threw while being checked: the recipe failing, and the error its
// evidence. For a targeted variant it is a catch only where the check declares that error its detection.
void judge_thrown(Cell& cell, const Registry& registry, const PlannedCell& planned, const std::string& text) {
  cell.outcome = Outcome::kFail;
  cell.verdict = judge(cell.expected, cell.outcome, cell.role);
  cell.evidence = "recipe threw: " + text;
  if (const ThrownDetection* d = declared_detection(*planned.check, text)) {
    cell.metrics["promises"] = nlohmann::json::array(
        {{{"id", d->promise}, {"status", "broken"}, {"evidence", "threw the error it detects: " + text}}});
    cell.evidence = "- threw the error " + cell.check + " detects (" + d->promise + "): " + text;
    if (cell.expected == Expected::kFail) {
      const std::string other = caught_by_another(*planned.recipe, *planned.check, cell.metrics);
      if (!other.empty()) {
        cell.verdict = Verdict::kMissed;
        cell.evidence = other + cell.evidence;
      }
    }
  } else if (cell.expected == Expected::kFail) {
    cell.verdict = Verdict::kError;
    cell.evidence = kNotACatch + cell.evidence;
  }
  // Another check declares this error its detection: that check owns the practice the recipe
  // breaks (the summary says so once, not each cell).
  for (const CheckInfo& owner : registry.checks()) {
    if (owner.name == cell.check) continue;
    if (const ThrownDetection* d = declared_detection(owner, text)) {
      cell.metrics["error_owned_by"] = {{"check", owner.name}, {"promise", d->promise},
                                        {"message_contains", d->message_contains}};
      break;
    }
  }
}

}  // namespace

// The process-wide state a recipe's code can change and every later cell would inherit (the cells
// of one recipe share its process): the default dtype, grad mode, LibTorch's intra-op threads, the
// working directory, the deterministic-algorithm flags and the CPU generator. Each cell starts from
// the state the process started its first cell with. A cell that left the first four changed is
// told so in its own evidence (a recipe is not asked to change them); the flags and the generator
// are put back silently (RunOptions::deterministic asks the set-up to set the flags, and every
// set-up seeds).
struct ProcessState {
  caffe2::TypeMeta dtype = c10::get_default_dtype();
  bool grad = c10::GradMode::is_enabled();
  int threads = at::get_num_threads();
  std::string cwd = current_directory();
  bool deterministic = at::globalContext().deterministicAlgorithms();
  bool deterministic_warn_only = at::globalContext().deterministicAlgorithmsWarnOnly();
  bool cudnn_deterministic = at::globalContext().deterministicCuDNN();
  bool cudnn_benchmark = at::globalContext().benchmarkCuDNN();
  at::Tensor cpu_generator = generator_state();

  static std::string current_directory() {
    char buf[PATH_MAX];
    return getcwd(buf, sizeof buf) != nullptr ? std::string(buf) : std::string();
  }
  static at::Tensor generator_state() {
    at::Generator g = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(g.mutex());
    return g.get_state();
  }
  // Puts `start` back; returns what differed from it that a recipe is not asked to change ("" when
  // nothing did).
  static std::string restore(const ProcessState& start) {
    const ProcessState now;
    std::string changed;
    auto note = [&changed](const std::string& what) { changed += (changed.empty() ? "" : "; ") + what; };
    if (now.dtype != start.dtype) {
      note("the default dtype (" + std::string(now.dtype.name()) + ", restored to " + std::string(start.dtype.name()) + ")");
      c10::set_default_dtype(start.dtype);
    }
    if (now.grad != start.grad) {
      note(std::string("grad mode (") + (now.grad ? "on" : "off") + ", restored to " + (start.grad ? "on" : "off") + ")");
      c10::GradMode::set_enabled(start.grad);
    }
    if (now.threads != start.threads) {
      note("LibTorch's intra-op threads (" + std::to_string(now.threads) + ", restored to " +
           std::to_string(start.threads) + ")");
      at::set_num_threads(start.threads);
    }
    if (!start.cwd.empty() && now.cwd != start.cwd) {
      note("the working directory (" + now.cwd + ", restored to " + start.cwd + ")");
      if (chdir(start.cwd.c_str()) != 0) changed += " (chdir back failed)";
    }
    at::globalContext().setDeterministicAlgorithms(start.deterministic, start.deterministic_warn_only);
    at::globalContext().setDeterministicCuDNN(start.cudnn_deterministic);
    at::globalContext().setBenchmarkCuDNN(start.cudnn_benchmark);
    {
      at::Generator g = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(g.mutex());
      g.set_state(start.cpu_generator);
    }
    return changed;
  }
};

// What sanity (harness/contract/sanity.h) finds wrong with the recipe's training on the cell's
// device, "" when nothing: computed once per recipe and device in this process. A recipe that throws
// here is left to the check, which meets the same error and reports it as the recipe failing.
std::string sanity_problem(const PlannedCell& planned, const RunPlan& plan) {
  static std::map<std::string, std::string> known;
  const std::string key = planned.recipe->name + "\n" + planned.device.name;
  if (auto it = known.find(key); it != known.end()) return it->second;
  RunOptions o;
  o.device = c10::Device(planned.device.name);
  o.seed = plan.seed;
  o.deterministic = true;
  o.quick = plan.quick;
  std::string problem;
  try {
    if (planned.recipe->make) problem = first_broken(training_sanity(planned.recipe->make, o));
  } catch (...) {
  }
  known[key] = problem;
  return problem;
}

bool runs_recipe_code(const PlannedCell& planned, const RunPlan& plan) {
  if (!planned.device.available || !planned.check->unsupported.empty() || planned.check->multi_process()) return false;
  const bool needs_absent_cuda = planned.recipe->is_variant() && planned.recipe->needs == "cuda" && !plan.cuda_present;
  return !needs_absent_cuda;
}

Cell cell_record(const Registry& registry, const PlannedCell& planned) {
  Cell cell;
  cell.check = planned.check->name;
  cell.recipe = planned.recipe->name;
  cell.device = planned.device.name;
  cell.role = planned.recipe->role();
  cell.language = planned.recipe->language;
  cell.expected = registry.expected(cell.check, cell.recipe);
  return cell;
}

namespace {

// The promises a targeted variant declares it breaks, on its record: the summary's teeth count a
// variant whose declared promises all ended not judged apart (summarize, contract/record.h).
void record_declared_breaks(Cell& cell, const PlannedCell& planned) {
  const std::vector<std::string>* declared = planned.recipe->declared_breaks(cell.check);
  if (cell.expected == Expected::kFail && declared != nullptr && cell.metrics.is_object()) {
    cell.metrics["declared_breaks"] = *declared;
  }
}

}  // namespace

Cell run_cell(const Registry& registry, const PlannedCell& planned, const RunPlan& plan) {
  Cell cell = cell_record(registry, planned);
  if (!planned.device.available) {
    cell.verdict = Verdict::kSkipped;
    cell.evidence = planned.device.reason;
    return cell;
  }
  if (cell.expected == Expected::kFail && planned.recipe->needs == "cuda" && !plan.cuda_present) {
    cell.verdict = Verdict::kSkipped;
    cell.evidence = "'" + cell.recipe + "' can only be caught where a CUDA device exists (on a "
                    "machine with one device kind every tensor is on it); this machine has none";
    return cell;
  }
  const CheckContext ctx = context_for(cell, planned, plan);
  if (ctx.world.size > 0) cell.device = ctx.world.label;  // a multi-process cell reads "cpu×2"
  if (ctx.world.size == 1 && planned.recipe->is_variant()) {
    // A broken practice of a multi-process check shows only between ranks.
    cell.verdict = Verdict::kSkipped;
    cell.evidence = "'" + cell.recipe + "' breaks a practice that shows only between ranks, and " + ctx.world.label +
                    " has one rank (on CUDA one rank per GPU: this machine has one)";
    return cell;
  }
  breadcrumb::set_cell(cell.check, cell.recipe);
  static const ProcessState kRunStart;  // the state of the process when the first cell started
  ProcessState::restore(kRunStart);
  const auto start = std::chrono::steady_clock::now();
  // Sanity before judgement: no check compares runs whose loss is NaN, or that train nothing.
  if (planned.check->sanity_precondition && plan.part.empty() && !plan.worker && !planned.check->multi_process()) {
    breadcrumb::set_cell(cell.check + " (the sanity run before it)", cell.recipe);
    const std::string problem = sanity_problem(planned, plan);
    ProcessState::restore(kRunStart);
    breadcrumb::set_cell(cell.check, cell.recipe);
    if (!problem.empty()) {
      cell.verdict = cell.expected == Expected::kFail ? Verdict::kError : Verdict::kSkipped;
      cell.evidence = std::string(cell.expected == Expected::kFail ? "a variant this check must catch was skipped (not a catch): " : "") +
                      "precondition: the recipe's training fails sanity (" + problem +
                      "), so this check has nothing it can compare; the sanity cell names it";
      cell.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return cell;
    }
  }
  try {
    judge_returned(cell, planned,
                   planned.check->multi_process() && !plan.worker ? launch_multi_process_cell(planned, plan, ctx)
                                                                  : planned.check->fn(ctx));
  } catch (const SkipCell& e) {
    // A variant the check must catch is never skipped from inside the check (a missing probe, a
    // precondition): its cell would read as skipped while nothing caught it. Only the runner skips
    // it, for the device it registered it needs (above). (A multi-process check's worker ranks other
    // than the judging one skip their cell: rank 0 judges it.)
    if (cell.expected == Expected::kFail && !plan.worker) {
      cell.verdict = Verdict::kError;
      cell.evidence = std::string("a variant this check must catch was skipped (not a catch): ") + e.what();
    } else {
      cell.verdict = Verdict::kSkipped;
      cell.evidence = e.what();
    }
  } catch (const HarnessError& e) {
    cell.verdict = Verdict::kError;
    cell.evidence = std::string("harness error: ") + e.what();
  } catch (const std::exception& e) {
    judge_thrown(cell, registry, planned, error_text(e));
  } catch (...) {
    cell.outcome = Outcome::kFail;
    cell.verdict = cell.expected == Expected::kFail ? Verdict::kError : judge(cell.expected, cell.outcome, cell.role);
    cell.evidence = std::string(cell.expected == Expected::kFail ? kNotACatch : "") +
                    "recipe threw a non-standard exception";
  }
  cell.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  record_declared_breaks(cell, planned);
  const std::string changed = ProcessState::restore(kRunStart);
  if (!changed.empty()) {
    cell.evidence += std::string(cell.evidence.empty() || cell.evidence.back() == '\n' ? "" : "\n") +
                     "- the cell left the process changed (restored before the next cell): " + changed;
  }
  return cell;
}

std::vector<Cell> run_cells(const Registry& registry, const RunPlan& plan,
                            const RunCallbacks& callbacks) {
  std::vector<PlannedCell> planned = plan_cells(registry, plan);
  std::vector<Cell> cells;
  cells.reserve(planned.size());
  if (!plan.isolate) {
    if (!planned.empty()) forking::recipe_process_start();  // this process runs the recipes' code
    for (size_t i = 0; i < planned.size(); ++i) {
      if (callbacks.on_start) callbacks.on_start(planned[i], i, planned.size());
      cells.push_back(run_cell(registry, planned[i], plan));
      if (callbacks.on_done) callbacks.on_done(cells.back(), i, planned.size());
    }
    return cells;
  }
  // Isolated: the cells of each (recipe, device) in a process of the recipe's own, in the order of
  // the plan's first cell of each; the report keeps the plan's order.
  std::vector<std::optional<Cell>> by_index(planned.size());
  std::vector<bool> taken(planned.size(), false);
  size_t done = 0;
  for (size_t i = 0; i < planned.size(); ++i) {
    if (taken[i]) continue;
    if (!runs_recipe_code(planned[i], plan)) {
      taken[i] = true;
      if (callbacks.on_start) callbacks.on_start(planned[i], done, planned.size());
      by_index[i] = run_cell(registry, planned[i], plan);
      if (callbacks.on_done) callbacks.on_done(*by_index[i], done, planned.size());
      ++done;
      continue;
    }
    std::vector<size_t> members;
    for (size_t j = i; j < planned.size(); ++j) {
      if (!taken[j] && planned[j].recipe == planned[i].recipe && planned[j].device.name == planned[i].device.name &&
          runs_recipe_code(planned[j], plan)) {
        members.push_back(j);
        taken[j] = true;
      }
    }
    std::vector<PlannedCell> group;
    for (size_t j : members) group.push_back(planned[j]);
    size_t k = 0;
    if (callbacks.on_start) callbacks.on_start(group.front(), done, planned.size());
    run_group_in_recipe_process(registry, group, plan, [&](const Cell& c) {
      by_index[members[k]] = c;
      if (callbacks.on_done) callbacks.on_done(c, done, planned.size());
      ++done;
      ++k;
      if (k < group.size() && callbacks.on_start) callbacks.on_start(group[k], done, planned.size());
    });
  }
  for (std::optional<Cell>& c : by_index) cells.push_back(std::move(*c));
  return cells;
}

}  // namespace tc
