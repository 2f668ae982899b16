#include "reference/loader_tools.h"

#include <thread>

#include <torch/cuda.h>
#include <torch/torch.h>

#include "harness/contract/costly_augment.h"

namespace tc::ref {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

DataWaitStats time_data_wait(const std::function<int64_t()>& next, const std::function<void()>& step,
                             int64_t warmup_steps, int64_t steps) {
  DataWaitStats s;
  s.warmup_steps = warmup_steps;
  for (int64_t i = 0; i < warmup_steps; ++i) {
    const auto t0 = Clock::now();
    const int64_t n = next();
    s.warmup_wait_s += seconds_since(t0);
    TORCH_CHECK(n > 0, "time_data_wait: the loader ended during warm-up");
    step();
  }
  const auto start = Clock::now();
  for (int64_t i = 0; i < steps; ++i) {
    const auto t0 = Clock::now();
    const int64_t n = next();
    s.wait_s += seconds_since(t0);
    if (n <= 0) break;
    step();
    s.samples += n;
    ++s.steps;
  }
  s.wall_s = seconds_since(start);
  return s;
}

at::Tensor costly_blur(const at::Tensor& images, int64_t rounds) { return CostlyAugment{rounds, {}}(images); }


}  // namespace tc::ref
