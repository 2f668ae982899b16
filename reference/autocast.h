// Autocast as a scope, through LibTorch's own at::autocast (the C++ side of torch.autocast).
//
//   {
//     tc::ref::AutocastGuard ac(device.type(), c10::kBFloat16);  // CPU: bf16; CUDA: fp16 or bf16
//     loss = loss_fn(model->forward(x), y);                       // matmuls/convs in bf16
//   }                                                             // state restored, cache cleared
//
// Does what Python's autocast.__enter__/__exit__ do: remembers the device's enabled flag, dtype
// and the cache flag, sets them, increments the nesting; on exit decrements it and, back at
// nesting 0, clears the cast cache (the lower-precision copies of the weights: keeping them
// would serve stale weights after the optimizer step), then restores the previous state.
// Autocast state is thread-local, like Python's.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

namespace tc::ref {

class AutocastGuard {
 public:
  AutocastGuard(c10::DeviceType device_type, c10::ScalarType dtype, bool enabled = true,
                bool cache_enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

  // The autocast dtype the device type defaults to (CPU bf16, CUDA fp16), as torch.autocast.
  static c10::ScalarType default_dtype(c10::DeviceType device_type);
  // Whether autocast is on for the device type in this thread.
  static bool enabled(c10::DeviceType device_type);
  static c10::ScalarType dtype(c10::DeviceType device_type);

 private:
  c10::DeviceType device_type_;
  bool prev_enabled_;
  c10::ScalarType prev_dtype_;
  bool prev_cache_enabled_;
};

}  // namespace tc::ref
