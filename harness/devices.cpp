#include "harness/devices.h"

#include <torch/cuda.h>

namespace tc {

bool cuda_available() { return torch::cuda::is_available(); }

int cuda_device_count() { return static_cast<int>(torch::cuda::device_count()); }

std::vector<DeviceSlot> resolve_devices(const std::string& spec) {
  const bool has_cuda = cuda_available();
  const std::string no_cuda =
      "no CUDA device: torch::cuda::is_available() is false on this machine";
  if (spec == "cpu") return {{"cpu", true, ""}};
  if (spec == "cuda") {
    if (!has_cuda) {
      throw UsageError(no_cuda + ". Use --device cpu, auto or all, or run on a machine with a GPU.");
    }
    return {{"cuda", true, ""}};
  }
  if (spec == "auto") return {has_cuda ? DeviceSlot{"cuda", true, ""} : DeviceSlot{"cpu", true, ""}};
  if (spec == "all") return {{"cpu", true, ""}, {"cuda", has_cuda, has_cuda ? "" : no_cuda}};
  throw UsageError("unknown device '" + spec + "': use cpu, cuda, auto or all");
}

}  // namespace tc
