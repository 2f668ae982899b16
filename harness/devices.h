// Resolves --device once, for the whole run.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "harness/run_plan.h"
#include "harness/usage_error.h"

namespace tc {

bool cuda_available();
int cuda_device_count();

// cpu | cuda | auto (best available) | all (every device kind; absent ones become skipped cells).
// Throws UsageError for an unknown spec or `cuda` on a machine without a usable CUDA device.
std::vector<DeviceSlot> resolve_devices(const std::string& spec);

}  // namespace tc
