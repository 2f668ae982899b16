// Broken variant the autograd_inplace check must catch ("No in-place operation sits on a tensor
// autograd still needs").
#include <torch/torch.h>

#include "harness/contract/registry.h"
#include "reference/reference_run.h"

namespace tc::variants {

// After the forward, the input batch is scaled in place for an image logger: the convolution
// saved that very tensor to compute its weight gradient.
class InplaceOnSaved : public ref::ReferenceRun {
 protected:
  at::Tensor forward_loss(const at::Tensor& x, const at::Tensor& y) override {
    at::Tensor loss = ReferenceRun::forward_loss(x, y);
    x.mul_(0.5).add_(0.5);  // to [0, 1] for the image logger, in place
    return loss;
  }
};

// The same logger, written through the tensor's `.data` (LibTorch's variable_data(), as Python's
// `x.data.mul_(0.5).add_(0.5)` or a library writing through data_ptr): the write shares the
// storage but not the version counter, so backward runs without complaint and the convolution's
// weight gradient is computed from the rescaled input.
class SilentInplaceOnSaved : public ref::ReferenceRun {
 protected:
  at::Tensor forward_loss(const at::Tensor& x, const at::Tensor& y) override {
    at::Tensor loss = ReferenceRun::forward_loss(x, y);
    x.variable_data().mul_(0.5).add_(0.5);  // to [0, 1] for the image logger, "outside autograd"
    return loss;
  }
};

}  // namespace tc::variants

TC_RECIPE(tc::variants::InplaceOnSaved, "inplace_on_saved",
          "modifies in place a tensor autograd saved for backward")
    ->MustBeCaughtBy({"autograd_inplace"})
    ->Breaks("autograd_inplace", {"no_inplace_on_saved"});
TC_RECIPE(tc::variants::SilentInplaceOnSaved, "silent_inplace_on_saved",
          "writes through .data (no version-counter bump) into a tensor autograd saved for backward")
    ->MustBeCaughtBy({"autograd_inplace"})
    ->Breaks("autograd_inplace", {"gradient_recomputes"});
