// Broken variants the amp check must catch ("Reach for mixed precision": autocast with a
// GradScaler, clip after unscale_, never a hand-made .half() model).
#include <torch/torch.h>

#include "harness/contract/registry.h"
#include "reference/reference_run.h"

namespace tc::variants {

// Fail: `model = model.half(); loss = criterion(model(data), target); loss.backward()`: weights,
// activations and gradients all in the lower precision, no autocast, no scaler.
class ManualHalf : public ref::ReferenceRun {
 protected:
  ref::ImageClassifier build_model() override {
    ref::ImageClassifier m = ReferenceRun::build_model();
    if (amp_on()) m->to(amp_.dtype);
    return m;
  }
  at::Tensor forward_loss(const at::Tensor& x, const at::Tensor& y) override {
    if (!amp_on()) return ReferenceRun::forward_loss(x, y);
    at::Tensor loss = torch::nn::functional::cross_entropy(model_->forward(x.to(amp_.dtype)), y);
    return amp_.loss_weight == 1.0 ? loss : loss * amp_.loss_weight;
  }
  std::unique_ptr<ref::GradScaler> make_grad_scaler() override {
    return std::make_unique<ref::GradScaler>(tc::GradScalerOptions{}.with_enabled(false));
  }
};

// Autocast to fp16 without a GradScaler (or with one constructed enabled=False): small gradients
// flush to zero in fp16, and an inf gradient reaches the weights.
class Fp16WithoutScaler : public ref::ReferenceRun {
 protected:
  std::unique_ptr<ref::GradScaler> make_grad_scaler() override {
    return std::make_unique<ref::GradScaler>(tc::GradScalerOptions{}.with_enabled(false));
  }
};

// Clips the scaled gradients, then unscales: the effective clip threshold is max_norm / scale.
class ClipBeforeUnscale : public ref::ReferenceRun {
 protected:
  void optimisation_step(const at::Tensor& loss) override {
    optimizer_->zero_grad(/*set_to_none=*/true);
    scaler_->scale(loss).backward();
    after_backward();
    torch::nn::utils::clip_grad_norm_(model_->parameters(), config_.clip_norm);
    scaler_->unscale_(*optimizer_);
    scaler_->step(*optimizer_);
    scaler_->update();
  }
};

}  // namespace tc::variants

TC_RECIPE(tc::variants::ManualHalf, "manual_half",
          "mixed precision by casting the model to the lower precision (.half()) and training "
                   "in it: no autocast, no GradScaler")
    ->MustBeCaughtBy({"amp"});
TC_RECIPE(tc::variants::Fp16WithoutScaler, "fp16_without_scaler",
          "fp16 autocast without a GradScaler")
    ->MustBeCaughtBy({"amp"});
TC_RECIPE(tc::variants::ClipBeforeUnscale, "clip_before_unscale",
          "clips the gradients before scaler.unscale_(): the scaled gradients are clipped")
    ->MustBeCaughtBy({"amp"});
