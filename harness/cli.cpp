#include "harness/cli.h"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "harness/atomic_file.h"
#include "harness/console.h"
#include "harness/devices.h"
#include "harness/environment.h"
#include "harness/html_writer.h"
#include "harness/registry.h"
#include "harness/report_json.h"
#include "harness/runner.h"
#include "harness/version.h"

namespace tc {
namespace {

using nlohmann::json;

constexpr int kExitUsage = 2;

std::string utc_now() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

json tool_json() {
  return {{"name", "torchconform"},
          {"version", build::kVersion},
          {"git_commit", build::kGitCommit ? json(build::kGitCommit) : json(nullptr)}};
}

std::vector<std::string> split_list(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const std::string& item : items) {
    std::stringstream ss(item);
    for (std::string part; std::getline(ss, part, ',');) {
      if (!part.empty()) out.push_back(part);
    }
  }
  return out;
}

int cmd_list(bool as_json) {
  const Registry& reg = Registry::global();
  if (as_json) {
    json j = {{"checks", json::array()}, {"recipes", json::array()}};
    for (const CheckInfo& c : reg.checks()) j["checks"].push_back({{"name", c.name}, {"promise", c.promise}, {"covers_variants", c.covers_variants}});
    for (const RecipeInfo& r : reg.recipes()) {
      j["recipes"].push_back({{"name", r.name}, {"description", r.description}, {"targets", r.targets}});
    }
    j["devices"] = {{"cpu", true}, {"cuda", cuda_available()}};
    std::cout << j.dump(2) << '\n';
    return 0;
  }
  std::cout << "checks:\n";
  for (const CheckInfo& c : reg.checks()) std::cout << "  " << c.name << "\n      " << c.promise << '\n';
  std::cout << "\nrecipes:\n";
  for (const RecipeInfo& r : reg.recipes()) {
    std::cout << "  " << r.name;
    if (r.is_variant()) {
      std::cout << "  (broken variant; must be caught by:";
      for (const auto& t : r.targets) std::cout << ' ' << t;
      std::cout << ')';
    }
    std::cout << "\n      " << r.description << '\n';
  }
  std::cout << "\ndevices:\n  cpu   available\n  cuda  "
            << (cuda_available() ? std::to_string(cuda_device_count()) + " device(s)" : "not available")
            << '\n';
  return 0;
}

struct RunArgs {
  std::string device = "auto";
  std::vector<std::string> checks, recipes;
  int64_t seed = 1234;
  bool quick = false;
  std::string json_path = "reports/latest.json";
  std::string html_path = "reports/latest.html";
};

int cmd_run(const RunArgs& a, int argc, char** argv) {
  const Registry& reg = Registry::global();
  for (const std::string& p : reg.validate()) {
    std::cerr << "torchconform: " << p << '\n';
    return kExitUsage;
  }
  RunPlan plan;
  plan.checks = split_list(a.checks);
  plan.recipes = split_list(a.recipes);
  plan.seed = a.seed;
  plan.quick = a.quick;
  plan.cuda_present = cuda_available();
  std::vector<PlannedCell> planned;
  try {
    plan.devices = resolve_devices(a.device);
    planned = plan_cells(reg, plan);
  } catch (const std::exception& e) {
    std::cerr << "torchconform: " << e.what() << '\n';
    return kExitUsage;
  }
  if (planned.empty()) {
    std::cerr << "torchconform: nothing to run: no check or recipe is registered\n";
    return kExitUsage;
  }

  Report report;
  report.tool = tool_json();
  json argv_json = json::array();
  for (int i = 0; i < argc; ++i) argv_json.push_back(argv[i]);
  json devices = json::array();
  for (const DeviceSlot& d : plan.devices) devices.push_back(d.name);
  report.run = {{"started_at", utc_now()}, {"argv", argv_json}, {"seed", a.seed},
                {"quick", a.quick},        {"devices", devices}};
  report.environment = capture_environment();

  std::cerr << "torchconform: " << planned.size() << " cells (" << plan.devices.size()
            << " device(s)), seed " << a.seed << (a.quick ? ", quick" : "") << '\n';
  const bool tty = isatty(STDERR_FILENO) != 0;
  RunCallbacks cb;
  cb.on_start = [&](const PlannedCell& p, size_t i, size_t n) {
    if (tty) {
      std::cerr << "[" << i + 1 << "/" << n << "] running " << p.check->name << " / "
                << p.recipe->name << " / " << p.device.name << " ...\r" << std::flush;
    }
  };
  cb.on_done = [&](const Cell& c, size_t i, size_t n) {
    if (tty) std::cerr << "\33[2K";
    print_cell_line(std::cerr, c, i, n);
  };
  report.cells = run_cells(reg, plan, cb);
  report.run["ended_at"] = utc_now();

  print_summary(std::cout, report.cells);
  try {
    if (!a.json_path.empty()) {
      write_file_atomically(a.json_path, report_to_json(report).dump(2) + "\n");
      std::cerr << "torchconform: wrote " << a.json_path << '\n';
    }
    if (!a.html_path.empty()) {
      write_file_atomically(a.html_path, render_html(report));
      std::cerr << "torchconform: wrote " << a.html_path << '\n';
    }
  } catch (const std::exception& e) {
    std::cerr << "torchconform: " << e.what() << '\n';
    return kExitUsage;
  }
  return exit_code_for(report.cells);
}

int cmd_report(const std::string& in, const std::string& html) {
  try {
    Report r = read_report_file(in);
    write_file_atomically(html, render_html(r));
    std::cerr << "torchconform: wrote " << html << '\n';
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "torchconform: " << e.what() << '\n';
    return kExitUsage;
  }
}

}  // namespace

int cli_main(int argc, char** argv) {
  CLI::App app{
      "torchconform: conformance and benchmark suite for PyTorch training practices.\n"
      "Every practice runs as a correct reference beside deliberately broken variants; a check\n"
      "counts only when the reference passes and every variant it targets is caught.\n"
      "Exit codes: 0 every cell ok or skipped, 1 a cell missed / false_alarm / error, 2 bad usage."};
  app.require_subcommand(1);

  bool list_json = false;
  auto* list = app.add_subcommand("list", "List checks, recipes (and which checks must catch each "
                                          "broken variant) and devices");
  list->add_flag("--json", list_json, "Print the catalogue as JSON");

  RunArgs ra;
  auto* run = app.add_subcommand("run", "Run the matrix check x recipe x device and write a report");
  run->add_option("--device", ra.device, "cpu | cuda | auto (best available) | all")
      ->capture_default_str();
  run->add_option("--check", ra.checks, "Only these checks (comma-separated)");
  run->add_option("--recipe", ra.recipes, "Only these recipes (comma-separated)");
  run->add_option("--seed", ra.seed, "Seed of the reference runs")->capture_default_str();
  run->add_flag("--quick", ra.quick, "Shorter runs (fewer steps)");
  run->add_option("--json", ra.json_path, "Report JSON path ('' to skip)")->capture_default_str();
  run->add_option("--html", ra.html_path, "Report HTML path ('' to skip)")->capture_default_str();

  std::string report_in, report_html;
  auto* report = app.add_subcommand("report", "Render a report JSON as HTML");
  report->add_option("RUN.json", report_in, "A report written by `run`")->required();
  report->add_option("--html", report_html, "Output HTML path")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  if (*list) return cmd_list(list_json);
  if (*run) return cmd_run(ra, argc, argv);
  if (*report) return cmd_report(report_in, report_html);
  return kExitUsage;
}

}  // namespace tc
