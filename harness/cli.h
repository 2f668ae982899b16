// The `torchconform` command line: list, run, report, bench, compare, ab, trend, qualify (one file
// each in harness/cli/). Every command exits 0 on success and 2 on bad usage or input; what 1 (and
// run's 77, every cell skipped) means is in each command's --help and in docs/design.md.
#pragma once

namespace tc {

int cli_main(int argc, char** argv);

}  // namespace tc
