#include "reference/autocast.h"

#include "reference/compat.h"

namespace tc::ref {

AutocastGuard::AutocastGuard(c10::DeviceType device_type, c10::ScalarType dtype, bool enabled,
                             bool cache_enabled)
    : device_type_(device_type),
      prev_enabled_(compat::autocast_enabled(device_type)),
      prev_dtype_(compat::autocast_dtype(device_type)),
      prev_cache_enabled_(at::autocast::is_autocast_cache_enabled()) {
  compat::set_autocast_enabled(device_type, enabled);
  compat::set_autocast_dtype(device_type, dtype);
  at::autocast::increment_nesting();
  at::autocast::set_autocast_cache_enabled(cache_enabled);
}

AutocastGuard::~AutocastGuard() {
  // Drop the cache when leaving the outermost autocast region (as autocast.__exit__).
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  compat::set_autocast_enabled(device_type_, prev_enabled_);
  compat::set_autocast_dtype(device_type_, prev_dtype_);
  at::autocast::set_autocast_cache_enabled(prev_cache_enabled_);
}

c10::ScalarType AutocastGuard::default_dtype(c10::DeviceType device_type) {
  return device_type == c10::kCUDA ? c10::kHalf : c10::kBFloat16;
}

bool AutocastGuard::enabled(c10::DeviceType device_type) { return compat::autocast_enabled(device_type); }

c10::ScalarType AutocastGuard::dtype(c10::DeviceType device_type) { return compat::autocast_dtype(device_type); }

}  // namespace tc::ref
