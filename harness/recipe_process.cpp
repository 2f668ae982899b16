#include "harness/recipe_process.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "harness/child_process.h"
#include "harness/console.h"
#include "harness/contract/scratch.h"
#include "harness/report_json.h"
#include "harness/util/breadcrumb.h"
#include "harness/util/forking.h"
#include "harness/util/posix_fs.h"
#include "harness/util/termination.h"

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
  const std::string& spec = cells.front().recipe->load_spec;  // a Python recipe: it alone is loaded there
  if (!spec.empty()) argv.insert(argv.end(), {"--python", spec});
  if (plan.quick) argv.push_back("--quick");
  if (plan.sweep) argv.push_back("--sweep");
  if (plan.no_sweep) argv.push_back("--no-sweep");
  return argv;
}

// The plan a recipe's process runs: the group's cells alone, streamed (what child_argv says by exec).
RunPlan group_plan(const std::vector<PlannedCell>& cells, const RunPlan& plan, const std::string& stream) {
  RunPlan sub = plan;
  sub.checks.clear();
  for (const PlannedCell& p : cells) sub.checks.push_back(p.check->name);
  sub.recipes = {cells.front().recipe->name};
  sub.devices = {cells.front().device};
  sub.isolate = false;
  sub.cell_stream = stream;
  return sub;
}

}  // namespace

void stream_cells(const Registry& registry, const RunPlan& plan, const std::string& breadcrumb_file) {
  if (!breadcrumb_file.empty()) breadcrumb::open(breadcrumb_file);
  // The stream's directory is the starting process's scratch for this one: stopped by a signal (its
  // parent killed, SIGKILL included: harness/util/termination.h), this process removes it, which
  // the parent can no longer do.
  termination::register_starting_process_directory(posix_fs::dir_name(plan.cell_stream).c_str());
  const int fd = ::open(plan.cell_stream.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot open the cell stream " + plan.cell_stream + ": " + strerror(errno));
  RunCallbacks cb;
  cb.on_done = [&](const Cell& c, size_t i, size_t n) {
    print_cell_line(std::cerr, c, i, n);
    const std::string line = cell_to_json(c).dump() + "\n";
    if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      throw std::runtime_error("cannot write the cell to " + plan.cell_stream);
    }
  };
  run_cells(registry, plan, cb);
  ::close(fd);
}

std::string unfinished_cell_evidence(const std::string& how, const std::string& check, const std::string& where,
                                     const std::string& log_tail, const std::string& then) {
  std::string e = "the recipe's process " + how + " during " + (where.empty() ? check + " (before its first recipe call)" : where) +
                  ": the cell did not finish, so it has no verdict" + (then.empty() ? "" : " (" + then + ")");
  if (!log_tail.empty()) e += "\n- the end of its output:\n" + log_tail;
  return e;
}

namespace {

using Finish = std::function<void(Cell)>;

// How the recipe's process starts: a fork of this one where it may (nothing loaded again), else by exec.
child::Spec recipe_process_spec(const Registry& registry, const std::vector<PlannedCell>& rest, const RunPlan& plan,
                                const Scratch& scratch, const std::string& stream, const std::string& crumb) {
  child::Spec spec;
  if (plan.fork_recipe_processes) forking::warm_up();  // once: what each fork would load for itself
  if (plan.fork_recipe_processes && forking::single_threaded()) {
    spec.body = [&registry, sub = group_plan(rest, plan, stream), crumb] {
      stream_cells(registry, sub, crumb);
      return 0;
    };
  } else {
    spec.argv = child_argv(rest, plan, scratch);
  }
  spec.log_path = scratch.file("output.log");
  spec.env = {{"TORCHCONFORM_RECIPE_PROCESS", "1"}};
  spec.timeout = std::chrono::hours(24 * 365);  // each cell has its own deadline, kept by the caller
  spec.kill_grace = std::chrono::seconds(5);
  return spec;
}

// The cells the process streamed since `offset`, each checked against the one the group expects next.
void take_streamed_cells(const Registry& registry, const std::vector<PlannedCell>& group, const std::string& stream,
                         std::streamoff& offset, size_t& next, Clock::time_point& cell_start, const Finish& finish) {
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
}

// The process is stopped where it is (`how` it was stopped, after `elapsed` s; `started`: it had
// reached its first cell): the cell at `next` gets where it was, and the group's later cells are not
// started again.
void stop_process(const Registry& registry, const std::vector<PlannedCell>& group, child::Process& process,
                  const std::string& crumb, const std::string& log, bool started, const std::string& how,
                  double elapsed, size_t& next, const Finish& finish) {
  const std::string where = breadcrumb::describe(crumb);
  const std::string output = child::tail_of(log, 1500);  // read first: stopped, the child removes its scratch
  process.wait_until(Clock::now());  // SIGTERM to the group, SIGKILL 5 s later
  finish(unfinished(registry, group[next], unfinished_cell_evidence("was " + how, group[next].check->name, where, output, ""),
                    elapsed));
  const std::string hung = group[next].check->name;
  const std::string why = started ? "the recipe's process hung in " + hung + " and was killed at the deadline"
                                  : "the recipe's process hung in its start-up, before " + hung + ", and was killed";
  for (++next; next < group.size(); ++next) {
    finish(unfinished(registry, group[next],
                      "not run: " + why + "; a recipe that hangs once is not started again for its other cells (each "
                      "would wait out a deadline)",
                      0));
  }
}

std::string deadline_how(const PlannedCell& p, const RunPlan& plan, double elapsed) {
  return "killed after " + std::to_string(static_cast<long>(elapsed)) + " s (the cell's deadline, " +
         std::to_string(deadline_s(p, plan)) + " s: " +
         (plan.cell_timeout_s > 0 ? "--cell-timeout" : "the check's Timeout, or --cell-timeout") + ")";
}

std::string startup_how(const RunPlan& plan, bool by_exec, double elapsed) {
  return "killed after " + std::to_string(static_cast<long>(elapsed)) + " s still starting, before its first cell (" +
         (by_exec ? "started by exec, it loads this program, the Python interpreter, torch and the recipe's module "
                    "again; "
                  : "") +
         "the bound on a start-up, " + std::to_string(plan.startup_timeout_s) + " s: --startup-timeout)";
}

}  // namespace

std::vector<Cell> run_group_in_recipe_process(const Registry& registry, const std::vector<PlannedCell>& group,
                                              const RunPlan& plan, const std::function<void(const Cell&)>& on_done) {
  std::vector<Cell> out;
  const Finish finish = [&](Cell c) {
    if (on_done) on_done(c);
    out.push_back(std::move(c));
  };
  size_t next = 0;  // the first cell of `group` without a verdict
  while (next < group.size()) {
    const std::vector<PlannedCell> rest(group.begin() + static_cast<std::ptrdiff_t>(next), group.end());
    Scratch scratch("torchconform-recipe-");
    const std::string stream = scratch.file("cells.jsonl"), crumb = scratch.file("breadcrumb"),
                      log = scratch.file("output.log");
    std::unique_ptr<child::Process> process;
    bool by_exec = false;
    try {
      child::Spec spec = recipe_process_spec(registry, rest, plan, scratch, stream, crumb);
      by_exec = !spec.body;
      process = std::make_unique<child::Process>(std::move(spec));
    } catch (const std::exception& e) {
      for (; next < group.size(); ++next) {
        finish(unfinished(registry, group[next], std::string("harness error: cannot start the recipe's process: ") + e.what(), 0));
      }
      break;
    }
    std::streamoff offset = 0;
    // A cell's deadline counts from where it starts: the first, from the end of the process's start-up
    // (its breadcrumb file, opened before its first cell), which has a bound of its own; each later
    // one, from the cell before it streamed back.
    auto cell_start = Clock::now();  // until the first cell starts: the process's start
    bool started = false, ended = false;
    for (;;) {
      const bool exited = process->finished();
      const size_t before = next;
      take_streamed_cells(registry, group, stream, offset, next, cell_start, finish);
      if (!started && (next > before || posix_fs::exists(crumb))) {
        started = true;
        if (next == before) cell_start = Clock::now();
      }
      if (next >= group.size()) {
        process->wait_until(Clock::now() + std::chrono::seconds(30));  // its exit status says nothing more
        ended = true;
        break;
      }
      if (exited) break;
      const double elapsed = std::chrono::duration<double>(Clock::now() - cell_start).count();
      if (elapsed > (started ? deadline_s(group[next], plan) : plan.startup_timeout_s)) {
        const std::string how = started ? deadline_how(group[next], plan, elapsed) : startup_how(plan, by_exec, elapsed);
        stop_process(registry, group, *process, crumb, log, started, how, elapsed, next, finish);
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
