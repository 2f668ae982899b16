// Starting a child by fork() without exec: the child is this process as it stands, with all it has
// loaded (LibTorch's libraries, an embedded Python with torch and the recipes' modules imported),
// so it starts in milliseconds where exec and the same loading take seconds (harness/recipe_process.h).
// Safe only while this process has one thread: fork copies the calling thread alone, so a pool's
// threads (OpenMP's after a parallel region, the CUDA driver's after cuInit) would be missing in the
// child with their locks held, and its first parallel region would hang (GCC's libgomp does not
// survive a fork of a process that used it). No torch here.
#pragma once

#include <sys/types.h>

namespace tc::forking {

// Whether this process has exactly one thread now (/proc/self/task).
bool single_threaded();

// A runtime that must prepare for a fork registers here (the embedded CPython: PyOS_BeforeFork and
// PyOS_AfterFork_Parent/_Child, as os.fork calls them); fork_with_hooks() calls them around fork().
// At most 4 sets; registering the same set twice has no effect.
void add_hooks(void (*before)(), void (*in_parent)(), void (*in_child)());

// fork() between the hooks: fork's value (-1 with errno set when it failed; the parent's hooks ran).
// Calls prepare_to_fork() first.
pid_t fork_with_hooks();

// Makes this process cheaper to fork, once it holds LibTorch: fork() copies one page-table entry
// for each 4 KiB page of private memory (LibTorch's heap, an 87 MiB region beside cuBLASLt's
// data: about 190 MiB; a fork, its child's exit and the wait for it took 13-17 ms where LibTorch's
// CPU libraries alone take 3 ms). Each large anonymous region that is nearly all resident (nothing
// added to the memory it holds) is mapped with 2 MiB pages instead (madvise MADV_COLLAPSE, Linux
// 6.1 and later; elsewhere nothing changes), whose entries a fork copies one per 2 MiB. Runs again
// only in a new process or where the process's anonymous memory grew by 32 MiB since; cheap
// otherwise. Every fork of this project that keeps the process's memory (fork_with_hooks, a
// bounded parse, a kill trial) calls it first. TORCHCONFORM_FORK_HUGE_PAGES=0 turns it off.
// Returns the MiB it mapped with 2 MiB pages this time (0 where none, or not supported).
long prepare_to_fork();

// Work a runtime does once in this process before the first recipe's process is forked from it
// (harness/recipe_process.cpp calls warm_up() before it decides between fork and exec): loading
// what every such child would otherwise load for itself, so that each has it from the fork. A
// warm-up must leave this process with one thread. At most 4; registering one twice has no effect.
void add_warm_up(void (*warm)());

// Runs each registered warm-up that has not run yet in this process.
void warm_up();

// Work a runtime does once in a process that runs recipes' code itself (a recipe's process, forked
// or started by exec; a torchrun rank; a part's fresh process; `run --in-process`), before its first
// cell (harness/runner.cpp, run_cells): what such a process would otherwise make later, from a state
// the recipes' code has changed by then (the embedded Python: its fork server's template,
// python/torchconform/_forkserver.py). Runs only while this process has one thread (a start may
// fork), once per process (a fork of one that ran them runs them again). At most 4; registering one
// twice has no effect.
void add_recipe_process_start(void (*start)());

// Runs each registered start, where this process has one thread and has not run them yet.
void recipe_process_start();

// Work a runtime does at the end of a process that may have run recipes' code, which ends without
// the runtime's own exit handlers: a forked child ends by _exit (harness/child_process.cpp, a rank
// forked by harness/rank_server.h), and the program's exit never finalizes the embedded Python
// (harness/cli/dispatch.cpp calls this after the command). The embedded Python: the temporary
// directory multiprocessing made in this process for its fork server's socket (pymp-*), which its
// interpreter's exit would have removed, stayed in the temporary folder, one for each process whose
// DataLoader had workers (python/torchconform/_forkserver.py, end_of_process). Each end must be
// safe to run in any process, more than once. At most 4; registering one twice has no effect.
void add_recipe_process_end(void (*end)());

// Runs each registered end.
void recipe_process_end();

// A runtime that keeps its own copy of the environment registers here (the embedded CPython's
// os.environ, read from the C environment once, when the interpreter starts). A process forked from
// a template whose environment is then replaced by another process's (a torchrun rank forked by
// harness/rank_server.h) calls environment_replaced(): each refresh runs, and OpenMP's thread count
// is set again from OMP_NUM_THREADS where that is set (libgomp reads it once, when it is loaded;
// torchrun sets it for its workers). At most 4; registering one twice has no effect.
void add_environment_refresh(void (*refresh)());
void environment_replaced();

}  // namespace tc::forking
