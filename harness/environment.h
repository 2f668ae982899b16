// The machine, captured once at the top of a report. What the machine cannot tell is null.
#pragma once

#include <nlohmann/json.hpp>

namespace tc {

// LibTorch, CUDA runtime + driver, cuDNN, NCCL, GPUs; CPU model, cores, flags; OS, compiler,
// build type; determinism + TF32 flags; relevant environment variables.
nlohmann::json capture_environment();

}  // namespace tc
