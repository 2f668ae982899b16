#include "reference/amp_step.h"

#include <optional>

#include <torch/torch.h>

#include "reference/autocast.h"

namespace tc::ref {

at::Tensor amp_train_step(const std::function<at::Tensor()>& forward_loss, torch::optim::Optimizer& optimizer,
                          GradScaler& scaler, const std::vector<at::Tensor>& params, const AmpStepOptions& options) {
  optimizer.zero_grad(/*set_to_none=*/true);
  at::Tensor loss;
  {
    std::optional<AutocastGuard> autocast;
    if (options.dtype != c10::kFloat) autocast.emplace(options.device.type(), options.dtype);
    loss = forward_loss();
  }
  scaler.scale(loss).backward();
  scaler.unscale_(optimizer);
  if (options.clip_norm > 0) torch::nn::utils::clip_grad_norm_(params, options.clip_norm);
  scaler.step(optimizer);
  scaler.update();
  return loss.detach();
}

}  // namespace tc::ref
