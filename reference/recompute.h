// Activation recomputation (gradient checkpointing) with the non-reentrant behaviour: the segment
// runs without keeping its activations; backward restores the RNG state the forward saw,
// recomputes the segment under grad mode and backpropagates into the segment's parameters and its
// input. The parameters are inputs of the autograd function, so they get their gradient whether or
// not the input requires one (the trap of PyTorch's use_reentrant=True).
#pragma once

#include <functional>
#include <vector>

#include <ATen/core/Tensor.h>

namespace tc::ref {

using Segment = std::function<at::Tensor(const at::Tensor&)>;

// `segment` must outlive the backward pass (keep it as a member of the module that calls this).
// Like PyTorch's checkpoint, modules with running statistics (BatchNorm) update them again during
// the recomputation.
at::Tensor recompute(const Segment& segment, const at::Tensor& x, const std::vector<at::Tensor>& params);

}  // namespace tc::ref
