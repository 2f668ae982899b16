// The one place for LibTorch version differences (pinned 2.15 here; 2.11 on the GPU machine;
// what older releases lack is noted beside each function). Keep this header small.
#pragma once

#include <string>

#include <ATen/autocast_mode.h>
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

// Autocast state per device type. 2.4 made the per-device functions take a DeviceType
// (is_autocast_enabled(kCPU), get_autocast_dtype(kCUDA), ...): 2.11 and 2.15 both have them. Before,
// each device had its own names (is_enabled() for CUDA, is_cpu_enabled(), get_autocast_gpu_dtype()).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
inline bool autocast_enabled(c10::DeviceType d) { return at::autocast::is_autocast_enabled(d); }
inline void set_autocast_enabled(c10::DeviceType d, bool on) { at::autocast::set_autocast_enabled(d, on); }
inline c10::ScalarType autocast_dtype(c10::DeviceType d) { return at::autocast::get_autocast_dtype(d); }
inline void set_autocast_dtype(c10::DeviceType d, c10::ScalarType t) { at::autocast::set_autocast_dtype(d, t); }
#else
inline bool autocast_enabled(c10::DeviceType d) {
  return d == c10::kCUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
}
inline void set_autocast_enabled(c10::DeviceType d, bool on) {
  if (d == c10::kCUDA) at::autocast::set_enabled(on); else at::autocast::set_cpu_enabled(on);
}
inline c10::ScalarType autocast_dtype(c10::DeviceType d) {
  return d == c10::kCUDA ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
}
inline void set_autocast_dtype(c10::DeviceType d, c10::ScalarType t) {
  if (d == c10::kCUDA) at::autocast::set_autocast_gpu_dtype(t); else at::autocast::set_autocast_cpu_dtype(t);
}
#endif

}  // namespace tc::compat
