// device_agnostic's CPU-vs-CUDA tolerance, judged on CPU tensors: the real comparison needs a CUDA
// device, the judgement does not. Held within rtol 1e-3 / atol 1e-4, broken beyond, both ways.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "suites/device_agnostic/judge.h"

namespace tc {
namespace {

std::string status(const Findings& f) {
  const CheckResult r = f.result();
  return r.metrics["promises"].at(0)["status"].get<std::string>() + ": " + r.evidence;
}

TEST(DeviceAgnosticTolerance, OutputsWithinTheToleranceHoldAndBeyondItBreak) {
  torch::manual_seed(3);
  const at::Tensor cpu = torch::randn({8, 10});
  {
    Findings f;
    judge_cpu_cuda_tolerance(cpu, cpu.clone(), f);
    EXPECT_EQ(status(f).rfind("held", 0), 0u) << status(f);
  }
  {
    // What TF32 or another convolution algorithm does: a relative change of 1e-5, inside 1e-3.
    Findings f;
    judge_cpu_cuda_tolerance(cpu, cpu * (1 + 1e-5), f);
    EXPECT_EQ(status(f).rfind("held", 0), 0u) << status(f);
  }
  {
    // One output off by 1% of its value plus 1e-3: beyond rtol 1e-3 / atol 1e-4.
    Findings f;
    at::Tensor off = cpu.clone();
    off[2][3] = off[2][3] * 1.01 + 1e-3;
    judge_cpu_cuda_tolerance(cpu, off, f);
    EXPECT_EQ(status(f).rfind("broken", 0), 0u) << status(f);
    EXPECT_NE(status(f).find("max |diff|"), std::string::npos) << status(f);
  }
}

}  // namespace
}  // namespace tc
