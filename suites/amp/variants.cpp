// Broken variants the amp check must catch ("Reach for mixed precision": autocast with a
// GradScaler, clip after unscale_, never a hand-made .half() model).
#include <torch/torch.h>

#include "harness/contract/registry.h"
#include "reference/autocast.h"
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
    torch::nn::utils::clip_grad_norm_(step_parameters(), config_.clip_norm);
    scaler_->unscale_(*optimizer_);
    scaler_->step(*optimizer_);
    scaler_->update();
  }
};

// Fail: `with torch.autocast("cuda", dtype=...)` in a script that trains on the CPU (or the other
// way round): the region is opened for the other device type, whose autocast never sees this
// device's tensors, so nothing is cast and every matmul runs in fp32.
class AutocastWrongDevice : public ref::ReferenceRun {
 protected:
  at::Tensor amp_forward(const std::function<at::Tensor(const at::Tensor&)>& loss_of, const at::Tensor& x) override {
    if (!amp_on()) return ReferenceRun::amp_forward(loss_of, x);
    const c10::DeviceType other = options_.device.is_cuda() ? c10::kCPU : c10::kCUDA;
    ref::AutocastGuard autocast(other, amp_.dtype);
    return loss_of(x);
  }
};

// Fail: "mixed precision" by casting the batch to the lower precision (`x = x.to(torch.bfloat16)`)
// with no autocast and the model left in fp32; the first layer refuses a bf16 input against its fp32
// weights ("expected scalar type Float"), so the input is brought to the model's dtype at its entry
// (`x.to(next(model.parameters()).dtype)`), and every matmul runs in fp32 on rounded inputs.
class InputsCastOnly : public ref::ReferenceRun {
 protected:
  at::Tensor amp_forward(const std::function<at::Tensor(const at::Tensor&)>& loss_of, const at::Tensor& x) override {
    if (!amp_on()) return ReferenceRun::amp_forward(loss_of, x);
    const at::Tensor batch = x.to(amp_.dtype);  // the batch "in mixed precision"
    return loss_of(batch.to(torch::kFloat));    // the model's entry: its parameters' dtype
  }
};

}  // namespace tc::variants

TC_RECIPE(tc::variants::ManualHalf, "manual_half",
          "mixed precision by casting the model to the lower precision (.half()) and training "
                   "in it: no autocast, no GradScaler")
    ->MustBeCaughtBy({"amp"})
    ->Breaks("amp", {"fp32_master_weights", "underflow", "scaler_accounting"});
TC_RECIPE(tc::variants::Fp16WithoutScaler, "fp16_without_scaler",
          "fp16 autocast without a GradScaler")
    ->MustBeCaughtBy({"amp"})
    ->Breaks("amp", {"underflow", "scaler_accounting"});
TC_RECIPE(tc::variants::ClipBeforeUnscale, "clip_before_unscale",
          "clips the gradients before scaler.unscale_(): the scaled gradients are clipped")
    ->MustBeCaughtBy({"amp"})
    ->Breaks("amp", {"clip_after_unscale", "parity"});
TC_RECIPE(tc::variants::AutocastWrongDevice, "autocast_wrong_device",
          "opens the autocast region for the other device type (cuda while training on the cpu, or the "
                   "other way round): nothing is cast")
    ->MustBeCaughtBy({"amp"})
    ->Breaks("amp", {"engagement"});
TC_RECIPE(tc::variants::InputsCastOnly, "inputs_cast_only",
          "casts the batch to the lower precision, no autocast, the model in fp32: the matmuls run in fp32")
    ->MustBeCaughtBy({"amp"})
    ->Breaks("amp", {"engagement"});
