// torchrun ranks forked from a template instead of started by exec (a runner feature; `run
// --recipe-processes fork`, the default, on the CPU). A rank started by exec loads this program,
// the embedded Python, torch and what the recipe's first calls import (torch._inductor, with
// torch._dynamo behind it) before it runs a step: about 3.8 s of CPU for each rank of each Python
// cell here, where the cell itself takes a fraction of a second.
//
// How:
//  - `run`, before it loads any recipe file (and, for Python recipes, once the interpreter has
//    started, torch is imported and warmed up: PythonStarter in harness/contract/python_loader.h),
//    forks the template: a process of its own group that listens on a Unix socket in a scratch
//    directory and does nothing else. TORCHCONFORM_RANK_SERVER names the socket to the processes
//    `run` starts.
//  - A multi-process cell on the CPU then starts torchrun with `torchconform-rank SOCKET` in front
//    of the command each rank runs (harness/rank_shim.cpp, a small program without LibTorch):
//    torchrun starts it as it would start the rank; it hands the template its argv, its
//    environment (RANK, WORLD_SIZE, MASTER_PORT, OMP_NUM_THREADS, ... as torchrun set them), its
//    working directory and its stdin, stdout and stderr, and the template forks the rank, which
//    takes all of them (Python's os.environ and OpenMP's thread count included:
//    forking::environment_replaced) and runs `main` with that argv. The rank then loads the
//    recipe's file itself, as a rank started by exec does.
//  - torchrun sees the shim: the shim forwards the signals it gets (SIGTERM when torchrun stops its
//    workers) to the rank's process group and ends as the rank ended (its exit status, or the same
//    signal). A shim that dies (SIGKILL) takes the rank with it (the template kills the group when
//    the socket closes); the rank dies with the template, the template with `run`.
//  - torchrun itself is forked too where the launching process has an interpreter it started
//    (harness/cell_in_child.h: torchrun_in_fork), whenever the ranks are.
//  - Where it cannot be done the rank starts by exec, as before: `--recipe-processes exec`; a
//    process with more than one thread when the template would be forked; a hosting Python (the
//    wheel's module); a machine with a GPU (`run` has asked the CUDA driver before, and a fork of a
//    process that did cannot use CUDA), and so every CUDA cell; no torchconform-rank
//    next to this program (a team's own build of the binary: examples/user_recipe); a template
//    that is gone (the shim then execs the command itself).
// What a forked rank shares with its sibling that ranks started by exec do not: what CPython fixes
// when it starts (the hash secret of str and bytes: a set of strings iterates in the same order on
// every rank); Python's `random` is seeded again in each fork (CPython's at-fork hook) and torch's
// generators start from their fixed default seed either way. `--recipe-processes exec` gives each
// rank an interpreter of its own. No torch here.
#pragma once

#include <string>
#include <vector>

namespace tc::rank_server {

// The program a rank's process runs with its argv (the command line's tc::cli_main), the same in
// the template as in this process.
using RankMain = int (*)(int argc, char** argv);

// The environment variable naming the template's socket, set in this process by start().
inline constexpr const char* kSocketVar = "TORCHCONFORM_RANK_SERVER";
// The shim's file name, looked up next to the executable the ranks run.
inline constexpr const char* kShimName = "torchconform-rank";

// Forks the template (this process must have one thread: forking::single_threaded) and sets
// kSocketVar. Returns "" on success, else why it was not started (nothing changed then). It ends
// when this process does.
std::string start(RankMain rank_main, const std::string& executable);

// What goes in front of a rank's command for a cell on `device` whose ranks run `executable`: the
// shim and the socket, or nothing where the ranks start by exec (no template, not the CPU, no shim).
std::vector<std::string> launcher_prefix(const std::string& device, const std::string& executable);

// The shim beside `executable`, or "" when there is none.
std::string shim_next_to(const std::string& executable);

}  // namespace tc::rank_server
