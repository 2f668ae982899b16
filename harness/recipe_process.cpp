#include "harness/recipe_process.h"

#include <signal.h>
#include <string.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "harness/child_process.h"
#include "harness/contract/scratch.h"
#include "harness/report_json.h"
#include "harness/util/breadcrumb.h"

namespace tc {
namespace {

using Clock = std::chrono::steady_clock;

std::string how_it_ended(const child::Result& r) {
  if (r.signal != 0) {
    const char* name = sigabbrev_np(r.signal);
    return "was killed by signal " + std::to_string(r.signal) + (name ? std::string(" (SIG") + name + ")" : "");
  }
  return "exited with status " + std::to_string(r.exit_code);
}

// New complete lines of `path` from `offset` on (offset advanced past them).
std::vector<std::string> new_lines(const std::string& path, std::streamoff& offset) {
  std::vector<std::string> lines;
  std::ifstream in(path, std::ios::binary);
  if (!in) return lines;
  in.seekg(offset);
  std::string chunk((std::istreambuf_iterator<char>(in)), {});
  size_t start = 0;
  for (size_t nl = chunk.find('\n'); nl != std::string::npos; nl = chunk.find('\n', start)) {
    lines.push_back(chunk.substr(start, nl - start));
    start = nl + 1;
  }
  offset += static_cast<std::streamoff>(start);
  return lines;
}

Cell unfinished(const Registry& registry, const PlannedCell& p, std::string evidence, double seconds) {
  Cell c = cell_record(registry, p);
  c.verdict = Verdict::kError;
  c.evidence = std::move(evidence);
  c.duration_s = seconds;
  return c;
}

int deadline_s(const PlannedCell& p, const RunPlan& plan) {
  return plan.cell_timeout_s > 0 ? plan.cell_timeout_s : p.check->timeout_s;
}

std::vector<std::string> child_argv(const std::vector<PlannedCell>& cells, const RunPlan& plan, const Scratch& s) {
  std::string checks;
  for (const PlannedCell& p : cells) checks += (checks.empty() ? "" : ",") + p.check->name;
  std::vector<std::string> argv = {plan.executable, "run", "--in-process", "--device", cells.front().device.name,
                                   "--recipe", cells.front().recipe->name, "--check", checks,
                                   "--seed", std::to_string(plan.seed), "--json", "", "--html", "",
                                   "--cell-stream", s.file("cells.jsonl"), "--breadcrumb", s.file("breadcrumb")};
  if (!plan.work_dir.empty()) argv.insert(argv.end(), {"--work-dir", plan.work_dir});
  for (const std::string& python : plan.python_specs) argv.insert(argv.end(), {"--python", python});
  if (plan.quick) argv.push_back("--quick");
  if (plan.sweep) argv.push_back("--sweep");
  return argv;
}

}  // namespace

std::string unfinished_cell_evidence(const std::string& how, const std::string& check, const std::string& where,
                                     const std::string& log_tail, const std::string& then) {
  std::string e = "the recipe's process " + how + " during " + (where.empty() ? check + " (before its first recipe call)" : where) +
                  ": the cell did not finish, so it has no verdict" + (then.empty() ? "" : " (" + then + ")");
  if (!log_tail.empty()) e += "\n- the end of its output:\n" + log_tail;
  return e;
}

std::vector<Cell> run_group_in_recipe_process(const Registry& registry, const std::vector<PlannedCell>& group,
                                              const RunPlan& plan, const std::function<void(const Cell&)>& on_done) {
  std::vector<Cell> out;
  auto finish = [&](Cell c) {
    if (on_done) on_done(c);
    out.push_back(std::move(c));
  };
  size_t next = 0;  // the first cell of `group` without a verdict
  while (next < group.size()) {
    const std::vector<PlannedCell> rest(group.begin() + static_cast<std::ptrdiff_t>(next), group.end());
    Scratch scratch("torchconform-recipe-");
    const std::string stream = scratch.file("cells.jsonl"), crumb = scratch.file("breadcrumb"),
                      log = scratch.file("output.log");
    child::Spec spec;
    spec.argv = child_argv(rest, plan, scratch);
    spec.log_path = log;
    spec.env = {{"TORCHCONFORM_RECIPE_PROCESS", "1"}};
    spec.timeout = std::chrono::hours(24 * 365);  // each cell has its own deadline, kept below
    spec.kill_grace = std::chrono::seconds(5);
    std::unique_ptr<child::Process> process;
    try {
      process = std::make_unique<child::Process>(spec);
    } catch (const std::exception& e) {
      for (; next < group.size(); ++next) {
        finish(unfinished(registry, group[next], std::string("harness error: cannot start the recipe's process: ") + e.what(), 0));
      }
      break;
    }
    std::streamoff offset = 0;
    auto cell_start = Clock::now();
    bool ended = false;
    for (;;) {
      const bool exited = process->finished();
      for (const std::string& line : new_lines(stream, offset)) {
        if (next >= group.size()) break;
        Cell c;
        try {
          c = cell_from_json(nlohmann::json::parse(line));
        } catch (const std::exception& e) {
          c = unfinished(registry, group[next], std::string("harness error: the recipe's process reported an unreadable cell: ") + e.what(), 0);
        }
        if (c.check != group[next].check->name || c.recipe != group[next].recipe->name) {
          c = unfinished(registry, group[next], "harness error: the recipe's process reported " + c.check + "/" + c.recipe +
                                                    " where " + group[next].check->name + " was expected", 0);
        }
        finish(std::move(c));
        ++next;
        cell_start = Clock::now();
      }
      if (next >= group.size()) {
        process->wait_until(Clock::now() + std::chrono::seconds(30));  // its exit status says nothing more
        ended = true;
        break;
      }
      if (exited) break;
      const double elapsed = std::chrono::duration<double>(Clock::now() - cell_start).count();
      if (elapsed > deadline_s(group[next], plan)) {
        const std::string where = breadcrumb::describe(crumb);
        const std::string output = child::tail_of(log, 1500);  // read first: stopped, the child removes its scratch
        process->wait_until(Clock::now());  // SIGTERM to the group, SIGKILL 5 s later
        const std::string how = "killed after " + std::to_string(static_cast<long>(elapsed)) + " s (the cell's deadline, " +
                                std::to_string(deadline_s(group[next], plan)) + " s: " +
                                (plan.cell_timeout_s > 0 ? "--cell-timeout" : "the check's Timeout, or --cell-timeout") + ")";
        finish(unfinished(registry, group[next],
                          unfinished_cell_evidence("was " + how, group[next].check->name, where, output, ""), elapsed));
        const std::string hung = group[next].check->name;
        for (++next; next < group.size(); ++next) {
          finish(unfinished(registry, group[next],
                            "not run: the recipe's process hung in " + hung + " and was killed at the deadline; a recipe that "
                            "hangs once is not started again for its other cells (each would wait out a deadline)",
                            0));
        }
        ended = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    if (ended) break;
    // The process ended with cells left: the one it was in has no verdict; the rest get a new process.
    const child::Result r = process->wait();
    const double elapsed = std::chrono::duration<double>(Clock::now() - cell_start).count();
    finish(unfinished(registry, group[next],
                      unfinished_cell_evidence(how_it_ended(r), group[next].check->name, breadcrumb::describe(crumb),
                                               child::tail_of(log, 1500),
                                               "a recipe must return from each call; the rest of the run is judged in a "
                                               "new process"),
                      elapsed));
    ++next;
  }
  return out;
}

}  // namespace tc
