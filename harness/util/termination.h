// What a torchconform process leaves when it is stopped: nothing. A run that is killed (Ctrl-C,
// SIGTERM from CI, its own parent dying) takes down the processes it started and removes the scratch
// directories it made, however deep the chain of processes (run -> a recipe's process -> a check's
// fresh process). No torch here.
//
//  - Every scratch directory (tc::Scratch) and every child process group (tc::child::Process)
//    registers here while it lives.
//  - install_termination_cleanup(): on SIGTERM, SIGINT or SIGHUP, kill each registered group
//    (SIGKILL), remove each registered directory, then die of the same signal. The handler uses only
//    async-signal-safe calls (kill, openat, getdents64, unlinkat): it may interrupt anything.
//  - Every child this program starts gets TORCHCONFORM_PARENT_PID; a torchconform process started so
//    (adopt_parent_death) asks the kernel for SIGTERM when its parent process dies, SIGKILL
//    included, and so cleans up as above. It exits at once when it is an orphan already.
#pragma once

#include <sys/types.h>

#include <string>

namespace tc::termination {

// Installs the handlers (idempotent). Call before starting children.
void install_termination_cleanup();

// Where TORCHCONFORM_PARENT_PID is set: SIGTERM on the parent's death (prctl PR_SET_PDEATHSIG).
// Also where kChildDirectoriesVariable is set and this process is the one its starter spawned: this
// process's scratch directories are mirrored into the starter's ChildDirectories (then the variable
// is removed from the environment).
void adopt_parent_death();

// Registration (thread-safe, lock-free; a full table drops the entry: cleanup is best effort there).
void register_directory(const char* path);
void unregister_directory(const char* path);
// A directory of the process that started this one, which this one removes only when stopped by a
// signal (the starter may be dead): never mirrored to the starter (ChildDirectories), which still
// reads it after this process has ended.
void register_starting_process_directory(const char* path);
void register_group(pid_t pgid);
void unregister_group(pid_t pgid);

// In a child made by fork() without exec (harness/util/forking.h): drop the parent's registrations,
// which are the parent's to clean up (the copies are not freed: the child ends with _exit), and ask
// for SIGTERM when the parent dies (an orphan already exits at once).
void forget_parents_registrations(pid_t parent);

// The directories a forked child registers, seen by its parent: a table in memory shared across the
// fork, which the child's registrations mirror (slot for slot). Once the child has ended, the parent
// removes what is still listed, so a child that ended without its own cleanup (a recipe's os._exit
// or SIGKILL: nothing of the child runs then) leaves no scratch directory behind. Made by the parent
// before the fork; the child calls mirror_here() after forget_parents_registrations(); the parent
// calls remove_listed() after the child is gone. A failed map leaves the cleanup to the child, as
// before; a path longer than a slot is not mirrored. A fork of the child (without mirror_here() of
// its own) does not write to the table.
// For a child started by exec: the table's file (a memfd) stays open across the exec (its number
// in the child is the same), and kChildDirectoriesVariable=for_exec() in the child's environment
// names it and this process; the child's adopt_parent_death() maps it.
inline constexpr const char* kChildDirectoriesVariable = "TORCHCONFORM_CHILD_DIRECTORIES";

class ChildDirectories {
 public:
  ChildDirectories();
  ~ChildDirectories();
  ChildDirectories(const ChildDirectories&) = delete;
  ChildDirectories& operator=(const ChildDirectories&) = delete;
  void mirror_here() const;    // in a forked child
  void remove_listed() const;  // in the parent, once the child has ended
  int fd() const { return fd_; }  // -1 when none could be made
  std::string for_exec() const;   // "FD:PID"; empty when none could be made

 private:
  int fd_ = -1;
  char* table_ = nullptr;
};

// Removes a directory tree with async-signal-safe calls only (what the handler does); for tests.
void remove_tree_signal_safe(const char* path);

}  // namespace tc::termination
