// Written against torchconform 0.2: the reference's training with a second step decay kept beside
// it for the team's logs, built from tc::ref::ResumableStepLR, the 0.2 name that 0.3 renamed
// (tc::ref::Resumable<torch::optim::StepLR>) and keeps one release as a deprecated alias.
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "harness/contract/registry.h"
#include "reference/reference_run.h"

namespace team {

class LoggedDecayRun : public tc::ref::ReferenceRun {
 public:
  void setup(const tc::RunOptions& o) override {
    ReferenceRun::setup(o);
    shadow_params_ = {torch::zeros({1}, torch::requires_grad())};
    shadow_ = std::make_unique<torch::optim::SGD>(shadow_params_, torch::optim::SGDOptions(config_.lr));
    decay_ = std::make_unique<tc::ref::ResumableStepLR>(*shadow_, config_.lr_step_size, config_.lr_gamma);
  }
  tc::StepRecord train_step() override {
    tc::StepRecord r = ReferenceRun::train_step();
    decay_->step();
    return r;
  }

 private:
  std::vector<torch::Tensor> shadow_params_;
  std::unique_ptr<torch::optim::SGD> shadow_;
  std::unique_ptr<tc::ref::ResumableStepLR> decay_;
};

}  // namespace team

TC_RECIPE(team::LoggedDecayRun, "team_logged_decay",
          "the reference's training with a step decay logged beside it (written against 0.2)");
