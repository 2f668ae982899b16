// The `torchconform` command line. Exit codes: 0 every cell ok or skipped, 1 any missed /
// false_alarm / error, 2 bad usage or environment.
#pragma once

namespace tc {

int cli_main(int argc, char** argv);

}  // namespace tc
