// The one place for LibTorch version differences (pinned 2.15 here; 2.11 on the GPU machine;
// 1.13 notes in ../shared/LIBTORCH.md). Keep this header small.
#pragma once

#include <string>

#include <torch/version.h>
#include <torch/optim/optimizer.h>

namespace tc::compat {

// Optimizer::state() is keyed by the parameter's TensorImpl* from 2.0 on, by its string form before.
#if TORCH_VERSION_MAJOR >= 2
inline void* optimizer_state_key(const at::Tensor& p) { return p.unsafeGetTensorImpl(); }
#else
inline std::string optimizer_state_key(const at::Tensor& p) {
  return c10::guts::to_string(p.unsafeGetTensorImpl());
}
#endif

inline std::string libtorch_version() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

}  // namespace tc::compat
