// Bitwise comparison of loss curves and named tensors, with the first difference described.
// For checks (suites/); uses LibTorch.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/contract/registry.h"
#include "harness/contract/run.h"

namespace tc {

// RunOptions for a cell: the cell's device and the given seed.
RunOptions run_options(const CheckContext& ctx, int64_t seed);

// Deep copies (detached, on CPU) of views a Run hands out.
NamedTensors snapshot(const NamedTensors& tensors);

// Index of the first entry where the curves differ bitwise (or where one is shorter).
std::optional<size_t> first_difference(const std::vector<double>& a, const std::vector<double>& b);

struct TensorDifference {
  std::string name;
  double max_abs_diff = 0.0;  // infinity where shapes, dtypes or names differ
  std::string detail;
};

// The first tensor (in order) that is not bitwise equal, or nullopt when all are.
std::optional<TensorDifference> first_tensor_difference(const NamedTensors& a, const NamedTensors& b);

// Largest |a - b| over two tensors of one shape (float64), infinity if shapes differ.
double max_abs_diff(const at::Tensor& a, const at::Tensor& b);

// Describes the first divergence of two loss curves: "step 3: loss 1.386294 vs 1.390112 (|diff| 3.8e-03)".
std::string describe_curve_difference(const std::vector<double>& a, const std::vector<double>& b,
                                      size_t index);

}  // namespace tc
