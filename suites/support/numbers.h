// Small helpers the checks' evidence and comparisons share: a number in scientific notation, a
// run's parameters as one vector, seconds since a time point.
#pragma once

#include <chrono>
#include <sstream>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "harness/contract/run.h"

namespace tc {

// v in scientific notation with `digits` after the point ("2.099e-07").
inline std::string sci(double v, int digits = 3) {
  std::ostringstream s;
  s.precision(digits);
  s << std::scientific << v;
  return s.str();
}

// Every tensor flattened into one double-precision CPU vector, in order (empty: a 0-element one).
inline at::Tensor flat_double(const NamedTensors& params) {
  std::vector<at::Tensor> parts;
  for (const auto& [n, p] : params) parts.push_back(p.detach().to(torch::kCPU, torch::kDouble).flatten());
  return parts.empty() ? torch::zeros({0}, torch::kDouble) : torch::cat(parts);
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace tc
