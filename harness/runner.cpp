#include "harness/runner.h"

#include <algorithm>
#include <chrono>

#include "harness/fresh_process.h"
#include "harness/multi_process.h"

namespace tc {
namespace {

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

Cell run_cell(const Registry& registry, const PlannedCell& planned, const RunPlan& plan) {
  Cell cell;
  cell.check = planned.check->name;
  cell.recipe = planned.recipe->name;
  cell.device = planned.device.name;
  cell.role = planned.recipe->role();
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
  if (!plan.executable.empty() && plan.part.empty()) {
    ctx.in_fresh_process = [exe = plan.executable, c = ctx](const std::string& part) {
      return run_part_in_fresh_process(exe, c, part);
    };
  }

  const auto start = std::chrono::steady_clock::now();
  try {
    CheckResult result = planned.check->multi_process() && !plan.worker
                             ? launch_multi_process_cell(planned, plan, ctx)
                             : planned.check->fn(ctx);
    cell.outcome = result.outcome;
    cell.evidence = std::move(result.evidence);
    cell.metrics = std::move(result.metrics);
    // A multi-process check names its world, e.g. "cpu×2" (2 ranks on the CPU).
    if (cell.metrics.is_object() && cell.metrics.contains("device_label") &&
        cell.metrics["device_label"].is_string()) {
      cell.device = cell.metrics["device_label"].get<std::string>();
    }
    cell.verdict = judge(cell.expected, cell.outcome, cell.role);
    if (cell.outcome == Outcome::kNone) cell.evidence = "check returned no outcome: " + cell.evidence;
  } catch (const SkipCell& e) {
    cell.verdict = Verdict::kSkipped;
    cell.evidence = e.what();
  } catch (const HarnessError& e) {
    cell.verdict = Verdict::kError;
    cell.evidence = std::string("harness error: ") + e.what();
  } catch (const std::exception& e) {
    // The recipe threw while being checked: that is the recipe failing, and the error its evidence.
    cell.outcome = Outcome::kFail;
    cell.verdict = judge(cell.expected, cell.outcome, cell.role);
    cell.evidence = std::string("recipe threw: ") + e.what();
  } catch (...) {
    cell.outcome = Outcome::kFail;
    cell.verdict = judge(cell.expected, cell.outcome, cell.role);
    cell.evidence = "recipe threw a non-standard exception";
  }
  cell.duration_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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
