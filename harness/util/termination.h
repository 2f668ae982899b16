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

namespace tc::termination {

// Installs the handlers (idempotent). Call before starting children.
void install_termination_cleanup();

// Where TORCHCONFORM_PARENT_PID is set: SIGTERM on the parent's death (prctl PR_SET_PDEATHSIG).
void adopt_parent_death();

// Registration (thread-safe, lock-free; a full table drops the entry: cleanup is best effort there).
void register_directory(const char* path);
void unregister_directory(const char* path);
void register_group(pid_t pgid);
void unregister_group(pid_t pgid);

// In a child made by fork() without exec (harness/util/forking.h): drop the parent's registrations,
// which are the parent's to clean up (the copies are not freed: the child ends with _exit), and ask
// for SIGTERM when the parent dies (an orphan already exits at once).
void forget_parents_registrations(pid_t parent);

// Removes a directory tree with async-signal-safe calls only (what the handler does); for tests.
void remove_tree_signal_safe(const char* path);

}  // namespace tc::termination
