#include "harness/environment.h"

#include <sys/utsname.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include "harness/contract/cuda_support.h"
#include "harness/version.h"

#ifndef TC_CUDA_COMPILED
#define TC_CUDA_COMPILED false  // set by harness/CMakeLists.txt: this LibTorch ships libtorch_cuda
#endif

namespace tc {
namespace {

using nlohmann::json;

json cpu_info() {
  json cpu = {{"model", nullptr}, {"logical_cores", nullptr}, {"flags", nullptr}};
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && cpu["model"].is_null()) cpu["model"] = value;
    if (key == "flags" && cpu["flags"].is_null()) {
      json flags = json::array();
      std::istringstream words(value);
      for (std::string w; words >> w;) flags.push_back(w);
      cpu["flags"] = flags;
    }
  }
  unsigned n = std::thread::hardware_concurrency();
  if (n > 0) cpu["logical_cores"] = n;
  cpu["torch_intra_op_threads"] = at::get_num_threads();
  return cpu;
}

json os_info() {
  json os = {{"name", nullptr}, {"kernel", nullptr}, {"arch", nullptr}, {"hostname", nullptr}};
  std::ifstream in("/etc/os-release");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("PRETTY_NAME=", 0) == 0) {
      std::string v = line.substr(12);
      if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
      os["name"] = v;
    }
  }
  struct utsname u {};
  if (uname(&u) == 0) {
    os["kernel"] = std::string(u.sysname) + " " + u.release;
    os["arch"] = u.machine;
    os["hostname"] = u.nodename;
  }
  return os;
}

json env_vars() {
  static const char* const kNames[] = {
      "CUDA_VISIBLE_DEVICES", "CUBLAS_WORKSPACE_CONFIG", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY",
      "PYTORCH_CUDA_ALLOC_CONF", "NCCL_DEBUG", "NCCL_SOCKET_IFNAME", "NCCL_P2P_DISABLE",
      "NCCL_IB_DISABLE", "GLOO_SOCKET_IFNAME", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
      "TORCH_NCCL_BLOCKING_WAIT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
      "TORCHELASTIC_RUN_ID", "LD_LIBRARY_PATH",
      // the CPU kernels' instruction sets: they change the numbers a run computes (compare --numerics)
      "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA",
      // torchconform bench: the test hook and the thread count (a slowed run shows in the diff)
      "TORCHCONFORM_BENCH_SLOWDOWN_MS", "TORCHCONFORM_BENCH_THREADS",
      // torchconform qualify: its test hooks (a slowed or perturbed rank shows in the report)
      "TORCHCONFORM_QUALIFY_SLOW_RANK", "TORCHCONFORM_QUALIFY_SLOWDOWN", "TORCHCONFORM_QUALIFY_PERTURB_RANK",
      // torchconform run: the intra-op thread count (harness/cli/run.cpp)
      "TORCHCONFORM_THREADS"};
  json out = json::object();
  for (const char* n : kNames) {
    const char* v = std::getenv(n);
    out[n] = v ? json(v) : json(nullptr);
  }
  return out;
}

const char* precision_name(at::Float32MatmulPrecision p) {
  switch (p) {
    case at::Float32MatmulPrecision::HIGHEST: return "highest";
    case at::Float32MatmulPrecision::HIGH: return "high";
    case at::Float32MatmulPrecision::MEDIUM: return "medium";
  }
  return "unknown";
}

json gpu_info() {
  // LibTorch's CUDA half is loaded where a driver is (harness/contract/cuda_support.h): "cuda_compiled"
  // says this build has it, "cuda_support" whether this process loaded it and why not.
  const cuda_support::Api* cuda = cuda_support::api();
  json gpu = {{"cuda_compiled", TC_CUDA_COMPILED},
              {"cuda_support", cuda_support::status()},
              {"cuda_available", torch::cuda::is_available()},
              {"cuda_runtime", nullptr},
              {"cuda_driver", nullptr},
              {"cudnn", nullptr},
              {"nccl", nullptr},
              {"devices", json::array()}};
  if (cuda == nullptr) return gpu;
  auto version_string = [](long v) {  // CUDA encodes 1000*major + 10*minor
    return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
  };
  if (const int rt = cuda->runtime_version(); rt > 0) gpu["cuda_runtime"] = version_string(rt);
  if (const int drv = cuda->driver_version(); drv > 0) gpu["cuda_driver"] = version_string(drv);
  if (at::globalContext().hasCuDNN()) {
    long v = at::globalContext().versionCuDNN();  // 9.x: 10000*major + 100*minor + patch
    if (v > 0) {
      gpu["cudnn"] = std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." +
                     std::to_string(v % 100);
    }
  }
  if (const std::uint64_t v = cuda->nccl_version(); v > 0) {  // (major << 32) | (minor << 16) | patch
    gpu["nccl"] = std::to_string(v >> 32) + "." + std::to_string((v >> 16) & 0xFFFF) + "." + std::to_string(v & 0xFFFF);
  }
  if (torch::cuda::is_available()) {
    for (int i = 0; i < static_cast<int>(torch::cuda::device_count()); ++i) {
      cuda_support::DeviceInfo d;
      if (!cuda->device_info(i, &d)) continue;
      gpu["devices"].push_back({{"index", i},
                                {"name", d.name},
                                {"memory_bytes", d.memory_bytes},
                                {"sms", d.multiprocessors},
                                {"compute_capability", std::to_string(d.major) + "." + std::to_string(d.minor)}});
    }
  }
  return gpu;
}

}  // namespace

json capture_environment() {
  auto& ctx = at::globalContext();
  json env;
  env["libtorch"] = {{"version", TORCH_VERSION},
                     {"cxx11_abi", static_cast<bool>(_GLIBCXX_USE_CXX11_ABI)},
                     {"parallel", at::get_parallel_info()}};
  env["gpu"] = gpu_info();
  env["cpu"] = cpu_info();
  env["os"] = os_info();
  env["build"] = {{"compiler", std::string("gcc-compatible ") + __VERSION__},
                  {"build_type", build::kBuildType},
                  {"cxx_standard", static_cast<long>(__cplusplus)}};
  env["flags"] = {{"deterministic_algorithms", ctx.deterministicAlgorithms()},
                  {"deterministic_algorithms_warn_only", ctx.deterministicAlgorithmsWarnOnly()},
                  {"cudnn_deterministic", ctx.deterministicCuDNN()},
                  {"cudnn_benchmark", ctx.benchmarkCuDNN()},
                  {"allow_tf32_cublas", ctx.allowTF32CuBLAS()},
                  {"allow_tf32_cudnn", ctx.allowTF32CuDNN()},
                  {"float32_matmul_precision", precision_name(ctx.float32MatmulPrecision())}};
  env["env_vars"] = env_vars();
  return env;
}

}  // namespace tc
