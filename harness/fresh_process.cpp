#include "harness/fresh_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "harness/launch.h"
#include "harness/report_json.h"
#include "harness/scratch.h"
#include "harness/util/posix_fs.h"

extern char** environ;

namespace tc {
namespace {

struct Exit {
  int code = -1;  // exit status, or 128 + signal
  bool timed_out = false;
};

// argv[0] in a process group of its own, stdout and stderr to `log`, stdin from /dev/null; waits
// until it exits or the deadline passes (then kills the group).
Exit spawn_and_wait(const std::vector<std::string>& argv, const std::string& log, std::chrono::seconds limit) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw HarnessError("cannot start '" + argv[0] + "': " + std::strerror(rc));

  Exit e;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() >= deadline) {
      e.timed_out = true;
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status)) e.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) e.code = 128 + WTERMSIG(status);
  return e;
}

}  // namespace

nlohmann::json run_part_in_fresh_process(const std::string& executable, const CheckContext& ctx,
                                         const std::string& part) {
  if (executable.empty()) throw HarnessError("no executable to start a fresh process of (RunPlan::executable)");
  Scratch scratch("torchconform-fresh-");
  const std::string report = scratch.file("part.json"), log = scratch.file("part.log");
  std::vector<std::string> argv = {executable, "run", "--device", ctx.device, "--check", ctx.check,
                                   "--recipe", ctx.recipe, "--seed", std::to_string(ctx.seed),
                                   "--part", part, "--json", report, "--html", ""};
  if (ctx.quick) argv.push_back("--quick");
  const std::string what = "the fresh process running " + ctx.check + " part '" + part + "'";
  const int limit = env_positive_int("TORCHCONFORM_FRESH_PROCESS_TIMEOUT_S", 300);
  const Exit e = spawn_and_wait(argv, log, std::chrono::seconds(limit));
  if (e.timed_out) {
    throw HarnessError(what + " did not finish in " + std::to_string(limit) + " s and was killed:\n" +
                       dist_launch::tail_of(log));
  }
  Report rep;
  try {
    rep = read_report_file(report);
  } catch (const std::exception&) {
    throw HarnessError(what + " exited with " + std::to_string(e.code) + " and wrote no report:\n" +
                       dist_launch::tail_of(log));
  }
  for (const Cell& c : rep.cells) {
    if (c.check != ctx.check || c.recipe != ctx.recipe) continue;
    if (c.verdict == Verdict::kSkipped) throw SkipCell(c.evidence);
    if (c.verdict == Verdict::kError) throw HarnessError(what + ": " + c.evidence);
    if (c.outcome != Outcome::kPass) throw std::runtime_error("in a fresh process: " + c.evidence);
    return c.metrics.is_object() ? c.metrics : nlohmann::json::object();
  }
  throw HarnessError(what + " reported no " + ctx.check + " cell for '" + ctx.recipe + "'");
}

}  // namespace tc
