#include "harness/runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>

#include "harness/cell_in_child.h"
#include <ATen/Parallel.h>
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

}  // namespace

std::vector<PlannedCell> plan_cells(const Registry& registry, const RunPlan& plan) {
  auto checks = select(registry.checks(), plan.checks, "check");
  auto recipes = select(registry.recipes(), plan.recipes, "recipe");
  std::vector<PlannedCell> cells;
  for (const DeviceSlot& d : plan.devices) {
    for (const CheckInfo* c : checks) {
      for (const RecipeInfo* r : recipes) {
        if (c->covers_variants || !r->is_variant()) cells.push_back({c, r, d});
      }
    }
  }
  return cells;
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
  ctx.role = cell.role;
  ctx.cuda_present = plan.cuda_present;
  ctx.make_run = planned.recipe->make;
  ctx.work_dir = plan.work_dir;
  ctx.recipe_is_variant = planned.recipe->is_variant();
  ctx.expected = cell.expected;
  ctx.part = plan.part;
  ctx.python_specs = plan.python_specs;
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
  // A multi-process check names its world, e.g. "cpu×2" (2 ranks on the CPU).
  if (cell.metrics.is_object() && cell.metrics.contains("device_label") && cell.metrics["device_label"].is_string()) {
    cell.device = cell.metrics["device_label"].get<std::string>();
  }
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

// The process-wide state a recipe's code can change and every later cell would inherit (a recipe
// runs in the judging process): the default dtype, grad mode, LibTorch's intra-op threads and the
// working directory. Each cell starts from the state the run started with; a cell that left it
// changed is told so in its own evidence, and the state is put back before the next cell.
// (Generators are reseeded by every set-up; deterministic-algorithm flags are the recipe's set-up's
// to choose, from RunOptions.)
struct World {
  caffe2::TypeMeta dtype = c10::get_default_dtype();
  bool grad = c10::GradMode::is_enabled();
  int threads = at::get_num_threads();
  std::string cwd = current_directory();

  static std::string current_directory() {
    char buf[PATH_MAX];
    return getcwd(buf, sizeof buf) != nullptr ? std::string(buf) : std::string();
  }
  // Puts `start` back; returns what differed from it ("" when nothing did).
  static std::string restore(const World& start) {
    const World now;
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
    return changed;
  }
};

Cell run_cell(const Registry& registry, const PlannedCell& planned, const RunPlan& plan) {
  Cell cell;
  cell.check = planned.check->name;
  cell.recipe = planned.recipe->name;
  cell.device = planned.device.name;
  cell.role = planned.recipe->role();
  cell.language = planned.recipe->language;
  cell.expected = registry.expected(cell.check, cell.recipe);
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
  static const World kRunStart;  // the state of the process when the first cell started
  World::restore(kRunStart);
  const auto start = std::chrono::steady_clock::now();
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
  const std::string changed = World::restore(kRunStart);
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
  for (size_t i = 0; i < planned.size(); ++i) {
    if (callbacks.on_start) callbacks.on_start(planned[i], i, planned.size());
    cells.push_back(run_cell(registry, planned[i], plan));
    if (callbacks.on_done) callbacks.on_done(cells.back(), i, planned.size());
  }
  return cells;
}

}  // namespace tc
