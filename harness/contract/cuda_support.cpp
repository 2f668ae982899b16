#include "harness/contract/cuda_support.h"
#include "harness/util/posix_fs.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

// Every program that links tc_contract carries this file (its link options name this symbol), so
// that the module is opened at start even in a program that never asks for it by name: LibTorch's
// own CUDA queries (torch::cuda::is_available()) need libtorch_cuda.so loaded before their first call.
extern "C" {
extern const int tc_cuda_support_anchor;
const int tc_cuda_support_anchor = 1;
}

namespace tc::cuda_support {
namespace {

struct State {
  const Api* api = nullptr;
  std::string status = "not loaded";
};

State& state() {
  static State s;
  return s;
}

std::string directory_of(const std::string& path) {
  char buf[PATH_MAX];
  const std::string real = realpath(path.c_str(), buf) != nullptr ? std::string(buf) : path;
  const size_t slash = real.rfind('/');
  return slash == std::string::npos ? std::string(".") : real.substr(0, slash);
}

// Where the module may be: TORCHCONFORM_CUDA_MODULE; beside this program (the build tree's binary,
// an installed one: bin/, the GPU bundle's); beside the object holding this code (the Python
// extension module of the wheel: torchconform/); where this build put it, and where it installs it
// (a test binary in a folder of the build tree; a team's binary linked with the installed package).
std::vector<std::string> candidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("TORCHCONFORM_CUDA_MODULE"); env != nullptr && *env != '\0') out.push_back(env);
  if (const std::string exe = posix_fs::executable_path(); !exe.empty()) out.push_back(directory_of(exe) + "/" + kModuleName);
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&state), &info) != 0 && info.dli_fname != nullptr && info.dli_fname[0] == '/') {
    out.push_back(directory_of(info.dli_fname) + "/" + kModuleName);
  }
#ifdef TC_CUDA_MODULE_BUILD_PATH
  out.push_back(TC_CUDA_MODULE_BUILD_PATH);
#endif
#ifdef TC_CUDA_MODULE_INSTALL_PATH
  out.push_back(TC_CUDA_MODULE_INSTALL_PATH);
#endif
  return out;
}

// Whether this process runs Python recipes (`run --python`, `list --python`, and the recipe
// processes and ranks started by exec with the same arguments): its `import torch` loads LibTorch's
// CUDA half anyway (libtorch_python.so needs it), but after LibTorch's first look at CUDA, which then
// keeps its stub (a recipe's `.cuda()` would raise "Cannot initialize CUDA without ATen_cuda
// library" instead of the words of a machine without a driver). Loaded at start there, as when linked.
bool runs_python() {
  FILE* f = std::fopen("/proc/self/cmdline", "rb");
  if (f == nullptr) return false;
  std::string args;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) args.append(buf, n);
  std::fclose(f);
  for (size_t at = 0; at < args.size();) {
    const size_t end = args.find('\0', at);
    const std::string arg = args.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (arg == "--python" || arg.rfind("--python=", 0) == 0) return true;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return false;
}

bool driver_here() {
  // Opened, not only looked for: a libcuda.so.1 that cannot load serves no device either.
  return dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) != nullptr;
}

void load() {
  State& s = state();
  const char* asked = std::getenv("TORCHCONFORM_CUDA");
  const std::string want = asked != nullptr ? asked : "";
  if (want == "0") {
    s.status = "not loaded: TORCHCONFORM_CUDA=0";
    return;
  }
  std::string why;
  if (want == "1") {
    why = "TORCHCONFORM_CUDA=1";
  } else if (driver_here()) {
    why = "a CUDA driver is here";
  } else if (runs_python()) {
    why = "this process runs Python recipes, whose torch loads it anyway";
  } else {
    s.status = "not loaded: no CUDA driver here (libcuda.so.1 does not open); TORCHCONFORM_CUDA=1 loads it anyway";
    return;
  }
  std::string tried;
  for (const std::string& path : candidates()) {
    if (access(path.c_str(), F_OK) != 0) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    // RTLD_GLOBAL: libtorch_cuda.so and the CUDA libraries it brings join the process's namespace,
    // as when linked (a Python recipe's torch finds them loaded already); RTLD_LAZY, as the loader
    // binds a linked library's functions (on first call, not every one of theirs at load).
    void* h = dlopen(path.c_str(), RTLD_LAZY | RTLD_GLOBAL);
    if (h == nullptr) {
      const char* e = dlerror();
      s.status = "not loaded: " + path + ": " + (e != nullptr ? e : "dlopen failed");
      return;
    }
    auto entry = reinterpret_cast<const Api* (*)()>(dlsym(h, kEntryPoint));
    if (entry == nullptr) {
      s.status = "not loaded: " + path + " has no " + kEntryPoint;
      return;
    }
    const Api* a = entry();
    if (a == nullptr || a->abi != kAbi) {
      s.status = "not loaded: " + path + " is from another build (interface " + std::to_string(a ? a->abi : -1) +
                 ", this program's " + std::to_string(kAbi) + ")";
      return;
    }
    s.api = a;
    s.status = "loaded from " + path + " (" + why + ")";
    return;
  }
  s.status = std::string("not loaded: ") + kModuleName + " not found (looked at " + tried +
             "; TORCHCONFORM_CUDA_MODULE names it)";
}

[[maybe_unused]] const bool g_loaded_at_start = (load(), true);

}  // namespace

const Api* api() { return state().api; }

std::string status() { return state().status; }

}  // namespace tc::cuda_support
