#include "suites/support/optimizer_view.h"

#include <torch/optim.h>

namespace tc {
namespace {

class LibTorchOptimizer : public OptimizerProbe {
 public:
  explicit LibTorchOptimizer(torch::optim::Optimizer& o) : o_(o) {}
  std::string optimizer_algorithm() override {
    // AdamW before Adam: the order matters only if one derived from the other.
    if (dynamic_cast<torch::optim::SGD*>(&o_)) return "SGD";
    if (dynamic_cast<torch::optim::AdamW*>(&o_)) return "AdamW";
    if (dynamic_cast<torch::optim::Adam*>(&o_)) return "Adam";
    if (dynamic_cast<torch::optim::RMSprop*>(&o_)) return "RMSprop";
    if (dynamic_cast<torch::optim::Adagrad*>(&o_)) return "Adagrad";
    if (dynamic_cast<torch::optim::LBFGS*>(&o_)) return "LBFGS";
    return "a LibTorch optimizer";
  }
  std::vector<OptimizerGroupView> optimizer_groups() override {
    std::vector<OptimizerGroupView> out;
    for (auto& g : o_.param_groups()) out.push_back({g.params(), g.options().get_lr()});
    return out;
  }
  void optimizer_step() override { o_.step(); }

 private:
  torch::optim::Optimizer& o_;
};

}  // namespace

std::shared_ptr<OptimizerProbe> optimizer_of(Run& run) {
  if (auto* own = dynamic_cast<OptimizerProbe*>(&run)) {
    (void)own->optimizer_algorithm();  // a recipe without an optimizer probe: ProbeNotProvided now
    return std::shared_ptr<OptimizerProbe>(std::shared_ptr<OptimizerProbe>{}, own);  // not owned
  }
  return std::make_shared<LibTorchOptimizer>(run.optimizer());  // ProbeNotProvided when absent
}

std::vector<double> learning_rates(OptimizerProbe& o) {
  std::vector<double> lrs;
  for (const auto& g : o.optimizer_groups()) lrs.push_back(g.lr);
  return lrs;
}

std::string element_normalising_optimizer(Run& run) {
  std::string a;
  try {
    a = optimizer_of(run)->optimizer_algorithm();
  } catch (const ProbeNotProvided&) {
    return "";
  }
  if (a == "SGD") return "";
  if (a == "AdamW" || a == "Adam" || a == "RMSprop" || a == "Adagrad") return a;
  return "an optimizer other than SGD (" + a + ")";
}

}  // namespace tc
