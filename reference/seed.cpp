#include "reference/seed.h"

#include <cstdlib>
#include <mutex>
#include <random>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/utils.h>

namespace tc::ref {

SeedRecord seed_everything(int64_t seed, bool deterministic, std::vector<at::Generator> owned) {
  if (deterministic && torch::cuda::is_available()) {
    // cuBLAS reads this before its first call; deterministic mode refuses to run without it.
    setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  }
  torch::manual_seed(static_cast<uint64_t>(seed));  // CPU and every CUDA device
  for (at::Generator& g : owned) {
    std::lock_guard<std::mutex> lock(g.mutex());
    g.set_current_seed(static_cast<uint64_t>(seed));
  }
  auto& ctx = at::globalContext();
  ctx.setDeterministicAlgorithms(deterministic, /*warn_only=*/false);
  ctx.setDeterministicCuDNN(deterministic);
  ctx.setBenchmarkCuDNN(!deterministic);
  return {true, seed, deterministic};
}

at::Generator nondeterministic_generator() {
  std::random_device rd;
  uint64_t seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return seeded_generator(seed);
}

at::Generator seeded_generator(uint64_t seed) {
  return at::make_generator<at::CPUGeneratorImpl>(seed);
}

}  // namespace tc::ref
