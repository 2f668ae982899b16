// Resolves --device once, for the whole run.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "harness/runner.h"

namespace tc {

// Bad usage or an environment that cannot do what was asked: `torchconform` exits 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

bool cuda_available();
int cuda_device_count();

// cpu | cuda | auto (best available) | all (every device kind; absent ones become skipped cells).
// Throws UsageError for an unknown spec or `cuda` on a machine without a usable CUDA device.
std::vector<DeviceSlot> resolve_devices(const std::string& spec);

}  // namespace tc
