// Broken variants the device_agnostic check must catch ("Write device-agnostic code").
#include <torch/torch.h>

#include "harness/contract/registry.h"
#include "reference/reference_run.h"

namespace tc::variants {

// Fail: model = MyModel().cuda(), whatever device was resolved.
class HardcodedCuda : public ref::ReferenceRun {
 protected:
  ref::ImageClassifier build_model() override {
    ref::ImageClassifier m = ReferenceRun::build_model();
    m->to(torch::kCUDA);
    options_.device = torch::Device(torch::kCUDA);  // and the data follows it there
    return m;
  }
};

// Class weights for the loss are made with the default (CPU) device while the logits live on the
// resolved device.
class MixedDevices : public ref::ReferenceRun {
 protected:
  at::Tensor forward_loss(const at::Tensor& x, const at::Tensor& y) override {
    at::Tensor weight = torch::ones({config_.data.classes});  // on the CPU, not on x.device()
    return torch::nn::functional::cross_entropy(
        model_->forward(x), y, torch::nn::functional::CrossEntropyFuncOptions().weight(weight));
  }
};

}  // namespace tc::variants

TC_RECIPE(tc::variants::HardcodedCuda, "hardcoded_cuda",
          "moves the model to CUDA whatever device was resolved")
    ->MustBeCaughtBy({"device_agnostic"})
    ->Breaks("device_agnostic", {"runs_on_every_device"});
TC_RECIPE(tc::variants::MixedDevices, "mixed_devices",
          "creates a loss tensor on the default CPU device")
    ->MustBeCaughtBy({"device_agnostic"})
    ->Breaks("device_agnostic", {"runs_on_every_device"})
    ->Needs("cuda");
