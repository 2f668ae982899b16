#include "harness/contract/run.h"

namespace tc {

at::Tensor Run::example_input(int64_t) const {
  throw ProbeNotProvided("the recipe does not provide example_input()");
}
at::Tensor Run::predict(const at::Tensor&) {
  throw ProbeNotProvided("the recipe does not provide predict()");
}
at::Tensor Run::forward_train(const at::Tensor&) {
  throw ProbeNotProvided("the recipe does not provide forward_train()");
}
std::pair<at::Tensor, at::Tensor> Run::last_batch() const {
  throw ProbeNotProvided("the recipe does not provide last_batch()");
}
at::Tensor Run::training_loss(const at::Tensor&, const at::Tensor&) {
  throw ProbeNotProvided("the recipe does not provide training_loss()");
}
torch::optim::Optimizer& Run::optimizer() {
  throw ProbeNotProvided("the recipe does not provide optimizer()");
}
double Run::clip_norm() const { throw ProbeNotProvided("the recipe does not provide clip_norm()"); }
std::vector<InitSpec> Run::declared_init() const {
  throw ProbeNotProvided("the recipe does not declare its initialisation (declared_init())");
}

std::shared_ptr<torch::nn::Module> Run::bare_model() {
  throw ProbeNotProvided("the recipe does not provide bare_model()");
}

}  // namespace tc
