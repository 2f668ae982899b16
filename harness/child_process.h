// The one way this program starts another: posix_spawn (nothing runs between fork and exec in a
// process that may have threads), or a fork without exec of a single-threaded process (a recipe's
// process: harness/recipe_process.h), a process group of its own, stdin from /dev/null, stdout and
// stderr to a log, and a deadline after which the group is stopped. Every child that runs a program
// goes through it: a check's part in a fresh process and torchrun cells (harness/cell_in_child.h),
// `qualify`'s torchrun, `ab`'s two builds (harness/ab/ab_launch.cpp), the distributed fault tests. Two
// short-lived forks that run no program do not: checkpoint_safety's saver killed mid-save
// (suites/checkpoint_safety/check.cpp) and the bounded parse of untrusted files
// (reference/bounded_parse.cpp), each a pipe and a waitpid of its own. No torch here.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tc::termination {
class ChildDirectories;
}  // namespace tc::termination

namespace tc::child {

struct Spec {
  std::vector<std::string> argv;                            // argv[0] found on PATH if it has no '/'
  // Instead of argv: the child is a fork of this process (no exec) that runs body() and exits with
  // its value (70 when it throws, the message in the log). Only while this process has one thread
  // (harness/util/forking.h: forking::single_threaded()); Process refuses it otherwise.
  std::function<int()> body;
  std::vector<std::pair<std::string, std::string>> env;     // added to this process's environment
  std::string log_path;                                     // stdout and stderr (appended)
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // At the deadline: SIGTERM to the group, SIGKILL this much later if it has not exited. torchrun
  // needs the default (it stops its workers, which it kills 30 s after its own SIGTERM); a single
  // process that ignores SIGTERM needs little.
  std::chrono::milliseconds kill_grace{std::chrono::seconds(45)};
};

struct Result {
  int exit_code = -1;      // the exit status, or 128 + signal
  int signal = 0;          // the signal that ended it, 0 when it exited
  bool timed_out = false;  // killed (whole process group) at the deadline
  double wall_s = 0.0;
};

// Runs spec in its own process group (std::runtime_error naming argv[0] when it cannot be started,
// e.g. not found); at the deadline SIGTERM to the group (torchrun then stops
// its workers, which live in sessions of their own), SIGKILL to the group kill_grace later.
Result run(const Spec& spec);

// Starts without waiting; wait() as run() does. For tests that act on the processes meanwhile.
class Process {
 public:
  explicit Process(const Spec& spec);
  ~Process();  // terminates the group as at the deadline if still running
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  int pid() const { return pid_; }
  // Whether it has ended (without waiting; then wait() returns at once).
  bool finished();
  // Waits until it ends or `deadline` (then terminates the group as run() does at its deadline).
  Result wait_until(std::chrono::steady_clock::time_point deadline);
  Result wait() { return wait_until(start_ + timeout_); }

 private:
  int pid_ = -1;
  std::chrono::steady_clock::time_point start_;
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds kill_grace_;
  bool done_ = false;
  bool reaped_ = false;  // finished() collected the exit status
  int reaped_status_ = 0;
  Result result_;
  // The child's scratch directories (forked or started by exec), removed here once it has ended (it
  // may have ended without removing them: a recipe's os._exit, SIGKILL).
  std::unique_ptr<termination::ChildDirectories> dirs_;
};

// torchrun: $TORCHCONFORM_TORCHRUN, else the one next to the configured Python (TC_TORCHRUN at
// build time), else `torchrun` on PATH; empty when none exists.
std::string find_torchrun();

// A TCP port free on 127.0.0.1 right now (bound to 0 and released).
int free_port();

// The last `bytes` of a file (for evidence).
std::string tail_of(const std::string& path, size_t bytes = 3000);

}  // namespace tc::child
