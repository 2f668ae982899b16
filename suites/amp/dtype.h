// The one name of a dtype in amp's evidence, metrics and benchmark names: fp16, bf16, fp32, fp64
// (LibTorch's own name for any other).
#pragma once

#include <string>

#include <c10/core/ScalarType.h>

namespace tc::amp {

inline std::string dtype_name(c10::ScalarType t) {
  switch (t) {
    case c10::kHalf: return "fp16";
    case c10::kBFloat16: return "bf16";
    case c10::kFloat: return "fp32";
    case c10::kDouble: return "fp64";
    default: return c10::toString(t);
  }
}

}  // namespace tc::amp
