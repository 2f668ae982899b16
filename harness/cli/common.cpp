#include "harness/cli/common.h"

#include "harness/cli.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <sstream>

#include <ATen/Parallel.h>

#include "harness/contract/python_loader.h"
#include "harness/environment.h"
#include "harness/util/atomic_file.h"
#include "harness/util/posix_fs.h"
#include "harness/version.h"

namespace tc::cli {

using nlohmann::json;

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

Report report_header(int argc, char** argv, int64_t seed, const json& devices) {
  Report report;
  report.tool = tool_json();
  json argv_json = json::array();
  for (int i = 0; i < argc; ++i) argv_json.push_back(argv[i]);
  report.run = {{"started_at", utc_now()}, {"argv", argv_json}, {"seed", seed}, {"devices", devices}};
  report.environment = capture_environment();
  return report;
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

namespace {
std::string& self_override() {
  static std::string path;
  return path;
}
}  // namespace

std::string self_executable() {
  if (!self_override().empty()) return self_override();
  return posix_fs::executable_path();
}

// The processes a check starts inherit the variable. OMP_NUM_THREADS alone is capped at the
// machine's cores by LibTorch; this is not, so a run can compare thread counts a machine does not
// have (compare --numerics).
void apply_thread_count() {
  const char* v = std::getenv("TORCHCONFORM_THREADS");
  if (v == nullptr || *v == '\0') return;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 1 || n > 1024) {
    throw UsageError(std::string("TORCHCONFORM_THREADS='") + v + "' is not a thread count from 1 to 1024");
  }
  at::set_num_threads(static_cast<int>(n));
}

void write_output(const std::string& path, const std::string& content) {
  write_file_atomically(path, content);
  std::cerr << "torchconform: wrote " << path << '\n';
}

int guarded(const std::function<int()>& command) {
  try {
    return command();
  } catch (const std::exception& e) {
    std::cerr << "torchconform: " << e.what() << '\n';
    return kExitUsage;
  }
}

std::vector<std::string> load_python_recipes(const std::vector<std::string>& specs) {
  std::vector<std::string> loaded;
  if (specs.empty()) return loaded;
  const PythonLoader* load = python_loader();
  if (load == nullptr) {
    throw UsageError("--python: this torchconform was built without the Python bridge (python/CMakeLists.txt says "
                     "why at configure time)");
  }
  for (const std::string& spec : specs) {
    try {
      for (const PythonRecipe& r : (*load)(spec)) loaded.push_back(r.spec);
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }
  return loaded;
}


}  // namespace tc::cli

namespace tc {
void set_self_executable(const std::string& path) { cli::self_override() = path; }
}  // namespace tc
