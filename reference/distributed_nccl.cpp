// ProcessGroupNCCL (libtorch_cuda), compiled where LibTorch has CUDA and nccl.h is found
// (TC_WITH_NCCL); elsewhere a clear error. Kept apart from distributed.cpp so that only this TU
// needs the CUDA and NCCL headers.
#include <chrono>
#include <stdexcept>
#include <string>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#ifdef TC_WITH_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace tc::ref::dist {

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size, int local_rank,
                                                    std::chrono::milliseconds timeout) {
#ifdef TC_WITH_NCCL
  const int devices = static_cast<int>(c10::cuda::device_count());
  if (local_rank >= devices) {
    throw std::runtime_error("NCCL rank " + std::to_string(rank) + " wants cuda:" +
                             std::to_string(local_rank) + " but this machine has " +
                             std::to_string(devices) + " CUDA device(s) (one rank per GPU)");
  }
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(local_rank));
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
#else
  (void)store, (void)rank, (void)size, (void)local_rank, (void)timeout;
  throw std::runtime_error("this build has no NCCL process group (LibTorch without CUDA, or nccl.h "
                           "not found at configure time)");
#endif
}

}  // namespace tc::ref::dist
