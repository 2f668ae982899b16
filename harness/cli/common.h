// What the commands of the command line share (harness/cli/*.cpp; cli/dispatch.cpp dispatches to them).
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/contract/record.h"
#include "harness/usage_error.h"

namespace CLI {
class App;
}

namespace tc::cli {

constexpr int kExitUsage = 2;

// --python: each spec's recipe loaded and registered in Registry::global() (before the registry is
// validated); returns the specs with absolute files, for the processes a check starts again. A spec
// the bridge refuses, or a binary without the bridge: UsageError.
std::vector<std::string> load_python_recipes(const std::vector<std::string>& specs);

// Bad usage or bad input: tc::UsageError (harness/usage_error.h), the core's and the commands' one
// class; its message, and exit 2 (guarded() is the one catch).
using tc::UsageError;

// One command: the subcommand its options were declared on, and what runs once it was parsed.
struct Command {
  CLI::App* sub = nullptr;
  std::function<int()> run;
};

// The commands, one file each (harness/cli/<name>.cpp). argc/argv are the whole command line,
// recorded in the reports the command writes.
Command add_list(CLI::App& app);
Command add_run(CLI::App& app, int argc, char** argv);
Command add_report(CLI::App& app);
Command add_bench(CLI::App& app, int argc, char** argv);
Command add_compare(CLI::App& app);
Command add_ab(CLI::App& app, int argc, char** argv);
Command add_trend(CLI::App& app);
Command add_qualify(CLI::App& app, int argc, char** argv);

std::string utc_now();
nlohmann::json tool_json();
// What every report written by `run`, `bench` and `qualify` starts with: the tool, the run
// (started_at, argv, seed, devices) and the environment as the run found it.
Report report_header(int argc, char** argv, int64_t seed, const nlohmann::json& devices);
// "a,b" "c" -> a, b, c.
std::vector<std::string> split_list(const std::vector<std::string>& items);
// This very binary (multi-process cells and qualify launch it under torchrun).
std::string self_executable();
// TORCHCONFORM_THREADS=N: LibTorch's intra-op threads for the whole run; bad values throw UsageError.
void apply_thread_count();
// Writes `content` to `path` atomically (what was there stays if the write fails) and says so on stderr.
void write_output(const std::string& path, const std::string& content);
// The one usage-error path: a command's bad usage, bad input or a write that cannot complete ends
// here with its message and exit 2 (nothing already written is lost: every write is atomic).
int guarded(const std::function<int()>& command);

}  // namespace tc::cli
