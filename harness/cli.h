// The `torchconform` command line: list, run, report, bench, compare, ab, trend, qualify (one file
// each in harness/cli/). Every command exits 0 on success and 2 on bad usage or input; what 1 (and
// run's 77, every cell skipped) means is in each command's --help and in docs/design.md.
#pragma once

#include <string>

namespace tc {

int cli_main(int argc, char** argv);

// The program that the processes this one starts run (a cell in a fresh process, a recipe's process,
// torchrun's workers, qualify's probes): this binary (/proc/self/exe) unless a host names another. The
// Python extension module (python/module/native.cpp) runs cli_main inside the team's interpreter and
// names a launcher that starts the same interpreter on `-m torchconform`.
void set_self_executable(const std::string& path);

}  // namespace tc
