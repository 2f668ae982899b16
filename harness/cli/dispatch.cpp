// tc::cli_main: the command line, a thin dispatcher over one file per command (harness/cli/*.cpp).
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "harness/cli.h"
#include "harness/cli/common.h"
#include "harness/util/forking.h"
#include "harness/util/termination.h"

namespace tc {

int cli_main(int argc, char** argv) {
  // Stopped, this process takes its children and scratch directories with it; started by another
  // torchconform process, it dies with that one (harness/util/termination.h).
  termination::adopt_parent_death();
  termination::install_termination_cleanup();
  CLI::App app{
      "torchconform: conformance and benchmark suite for PyTorch training practices.\n"
      "Every practice runs as a correct reference beside deliberately broken variants; a check\n"
      "counts only when the reference passes and every variant it targets is caught.\n"
      "Exit codes: every command 0 on success and 2 on bad usage or input; what 1 (and run's 77) mean is\n"
      "in each command's --help."};
  app.require_subcommand(1);
  const std::vector<cli::Command> commands = {
      cli::add_list(app),       cli::add_run(app, argc, argv), cli::add_report(app),
      cli::add_bench(app, argc, argv), cli::add_compare(app), cli::add_ab(app, argc, argv),
      cli::add_trend(app),      cli::add_qualify(app, argc, argv)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return cli::kExitUsage;
  }
  for (const cli::Command& c : commands) {
    if (!c.sub->parsed()) continue;
    const int rc = cli::guarded(c.run);
    // The embedded Python is never finalized, so its exit handlers do not run (harness/util/forking.h).
    forking::recipe_process_end();
    return rc;
  }
  return cli::kExitUsage;
}

}  // namespace tc
