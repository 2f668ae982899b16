// ProcessGroupNCCL (libtorch_cuda) through the CUDA module (harness/contract/cuda_support.h): this
// program links LibTorch's CPU half only; the module, loaded where a CUDA driver is, makes it.
#include <chrono>
#include <stdexcept>
#include <string>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "harness/contract/cuda_support.h"

namespace tc::ref::dist {

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size, int local_rank,
                                                    std::chrono::milliseconds timeout) {
  const cuda_support::Api* cuda = cuda_support::api();
  if (cuda == nullptr) {
    throw std::runtime_error("no NCCL process group in this process: LibTorch's CUDA half is " +
                             cuda_support::status());
  }
  return cuda->make_nccl_backend(store, rank, size, local_rank, timeout);
}

}  // namespace tc::ref::dist
