// libtorchconform_cuda.so: what torchconform needs of CUDA's own API, in a module that links
// LibTorch's CUDA half (harness/contract/cuda_support.h says why and when it is loaded). Plain
// functions behind one table; no state of its own.
#include <cstdio>
#include <stdexcept>
#include <string>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#ifdef TC_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "harness/contract/cuda_support.h"

namespace torch::cuda::nccl {
std::uint64_t version();  // torch/csrc/cuda/nccl.h, exported by libtorch_cuda
}

namespace tc::cuda_support {
namespace {

int runtime_version() {
  int v = 0;  // the runtime library's version needs no driver
  const bool ok = cudaRuntimeGetVersion(&v) == cudaSuccess;
  cudaGetLastError();
  return ok ? v : 0;
}

int driver_version() {
  int v = 0;
  const bool ok = cudaDriverGetVersion(&v) == cudaSuccess;
  cudaGetLastError();  // a machine without a driver leaves an error behind
  return ok ? v : 0;
}

std::uint64_t nccl_version() {
  try {
    return torch::cuda::nccl::version();
  } catch (const std::exception&) {
    return 0;
  }
}

bool device_info(int index, DeviceInfo* out) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  DeviceInfo d;
  d.name = prop.name;
  char uuid[64];
  const auto* u = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
  std::snprintf(uuid, sizeof uuid, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  d.uuid = uuid;
  char bus[32] = {0};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, index) != cudaSuccess) cudaGetLastError();
  d.pci_bus = bus;
  d.memory_bytes = static_cast<std::uint64_t>(prop.totalGlobalMem);
  d.multiprocessors = prop.multiProcessorCount;
  d.major = prop.major;
  d.minor = prop.minor;
  *out = d;
  return true;
}

int current_device() { return static_cast<int>(c10::cuda::current_device()); }

namespace cca = c10::cuda::CUDACachingAllocator;

void reset_peak_stats(int device) { cca::resetPeakStats(static_cast<c10::DeviceIndex>(device)); }

std::int64_t allocated_bytes(int device) {
  return cca::getDeviceStats(static_cast<c10::DeviceIndex>(device)).allocated_bytes[0].current;
}

std::int64_t peak_allocated_bytes(int device) {
  return cca::getDeviceStats(static_cast<c10::DeviceIndex>(device)).allocated_bytes[0].peak;
}

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    int local_rank, std::chrono::milliseconds timeout) {
#ifdef TC_WITH_NCCL
  const int devices = static_cast<int>(c10::cuda::device_count());
  if (local_rank >= devices) {
    throw std::runtime_error("NCCL rank " + std::to_string(rank) + " wants cuda:" + std::to_string(local_rank) +
                             " but this machine has " + std::to_string(devices) + " CUDA device(s) (one rank per GPU)");
  }
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(local_rank));
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
#else
  (void)store, (void)rank, (void)size, (void)local_rank, (void)timeout;
  throw std::runtime_error("this build has no NCCL process group (nccl.h was not found at configure time)");
#endif
}

const Api kApi = [] {
  Api a;
  a.abi = kAbi;
  a.runtime_version = runtime_version;
  a.driver_version = driver_version;
  a.nccl_version = nccl_version;
  a.device_info = device_info;
  a.current_device = current_device;
  a.reset_peak_stats = reset_peak_stats;
  a.allocated_bytes = allocated_bytes;
  a.peak_allocated_bytes = peak_allocated_bytes;
  a.make_nccl_backend = make_nccl_backend;
  return a;
}();

}  // namespace
}  // namespace tc::cuda_support

extern "C" __attribute__((visibility("default"))) const tc::cuda_support::Api* torchconform_cuda_api() {
  return &tc::cuda_support::kApi;
}
