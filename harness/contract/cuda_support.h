// The CUDA part of this program, loaded only where a CUDA driver is.
//
// LibTorch's CUDA half (libtorch_cuda.so, with libc10_cuda, the CUDA runtime, cuDNN, cuBLAS, NCCL...)
// took 0.18 of the 0.45 s of CPU that every start of this program took on a machine without a GPU
// (dlopen of libtorch_cpu.so alone against it with libtorch_cuda.so, a 2-core machine), and 16 of
// the 25 s of a start under valgrind; a ctest run starts this program and its test binaries some
// 500 times. So the programs link LibTorch's CPU half only, and what needs CUDA's own API lives in
// libtorchconform_cuda.so (harness/cuda/cuda_module.cpp), which links the CUDA half: this file
// opens it at start (a static initializer, before any LibTorch call), where libcuda.so.1 (the
// driver; without it no CUDA device is usable) opens, or TORCHCONFORM_CUDA=1 asks. Loading it loads
// libtorch_cuda.so, whose CUDA kernels and hooks LibTorch then finds as when linked: it must come
// before LibTorch's first look at CUDA (at::detail::getCUDAHooks() keeps what it found the first
// time), hence at start. A process that runs Python recipes (--python among its arguments) loads it
// too: its `import torch` loads the CUDA half anyway, and LibTorch must find it there from the start.
// TORCHCONFORM_CUDA=0 never loads it (CUDA is then unavailable).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <c10/util/intrusive_ptr.h>

namespace c10d {
class Backend;
class Store;
}  // namespace c10d

namespace tc::cuda_support {

// One CUDA device, as the CUDA runtime describes it.
struct DeviceInfo {
  std::string name;
  std::string uuid;     // "GPU-xxxxxxxx-..." as nvidia-smi writes it
  std::string pci_bus;  // "0000:3b:00.0"
  std::uint64_t memory_bytes = 0;
  int multiprocessors = 0;
  int major = 0;
  int minor = 0;
};

// What the module provides (kAbi changes whenever this struct does: a module from another build is
// refused rather than called through a wrong layout).
struct Api {
  int abi = 0;
  // CUDA's 1000*major + 10*minor; 0 when unknown (the driver's needs a driver).
  int (*runtime_version)() = nullptr;
  int (*driver_version)() = nullptr;
  // NCCL's (major << 32) | (minor << 16) | patch; 0 when unknown.
  std::uint64_t (*nccl_version)() = nullptr;
  // False (and `out` untouched) where the runtime cannot describe device `index`.
  bool (*device_info)(int index, DeviceInfo* out) = nullptr;
  int (*current_device)() = nullptr;
  // The caching allocator's statistics of one device (allocated bytes, all pools).
  void (*reset_peak_stats)(int device) = nullptr;
  std::int64_t (*allocated_bytes)(int device) = nullptr;
  std::int64_t (*peak_allocated_bytes)(int device) = nullptr;
  // A ProcessGroupNCCL for one rank per GPU (local_rank is its device); throws where this machine
  // has fewer devices, or the module was built without NCCL.
  c10::intrusive_ptr<c10d::Backend> (*make_nccl_backend)(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                         int size, int local_rank,
                                                         std::chrono::milliseconds timeout) = nullptr;
};
inline constexpr int kAbi = 1;

// The module's entry point (extern "C", so that dlsym finds it by this name).
inline constexpr const char* kEntryPoint = "torchconform_cuda_api";
inline constexpr const char* kModuleName = "libtorchconform_cuda.so";

// The loaded module's functions; nullptr where it is not loaded (no driver here, TORCHCONFORM_CUDA=0,
// or it could not be loaded: status() says which).
const Api* api();

// Why api() is what it is, in words ("loaded from PATH", "not loaded: no CUDA driver (libcuda.so.1)
// here", "not loaded: PATH: <dlerror>").
std::string status();

}  // namespace tc::cuda_support
