// device_agnostic's judgement of CPU vs CUDA outputs, apart from the runs that make them: a test
// judges it on CPU tensors (this machine may have no CUDA device; the real path needs one).
#pragma once

#include <ATen/core/Tensor.h>

#include "suites/support/kit.h"

namespace tc {

// The "cpu_cuda_tolerance" promise into `out`: the outputs `cpu` and `cuda` (both on the CPU) from
// the same initial weights agree within rtol 1e-3 / atol 1e-4 (cuDNN may use TF32 and other
// algorithms than the CPU kernels).
void judge_cpu_cuda_tolerance(const at::Tensor& cpu, const at::Tensor& cuda, Findings& out);

}  // namespace tc
