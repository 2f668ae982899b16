// Seeding: every generator a run uses, and a record of whether determinism was on.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Generator.h>

namespace tc::ref {

struct SeedRecord {
  bool seeded = false;
  int64_t seed = 0;
  bool deterministic = false;  // deterministic algorithms + cuDNN deterministic, benchmark off
};

// Seeds torch's CPU and CUDA generators and every generator in `owned` (the loader's, ...), and
// sets determinism (deterministic algorithms, cuDNN deterministic, cuDNN benchmark off; on CUDA also
// CUBLAS_WORKSPACE_CONFIG if unset). C++ generators a run uses (the augmentation's std::mt19937_64)
// are derived per batch from the loader's generator, so seeding it seeds them.
SeedRecord seed_everything(int64_t seed, bool deterministic, std::vector<at::Generator> owned);

// A CPU generator seeded from std::random_device: what a generator is when nobody seeds it.
at::Generator nondeterministic_generator();

// A CPU generator seeded with `seed`.
at::Generator seeded_generator(uint64_t seed);

}  // namespace tc::ref
