// A team's image recipe derived from torchconform's reference: the reference's training, data and
// checkpointing, with the team's own model forward (a model derived from the reference's
// classifier, reference/derived_model.h, from the installed package).
//
// The forward is the team's: inputs rescaled from [0, 1) to [-1, 1), the reference's features,
// then its classifier. It calls extract_features() rather than features->forward(), so the run's
// activation_checkpointing option still recomputes the features in backward (the
// grad_checkpointing check measures it: `team_checks run --recipe team_cnn --check grad_checkpointing`).
#include <torch/torch.h>

#include "harness/contract/registry.h"
#include "reference/derived_model.h"
#include "reference/reference_run.h"

namespace team {

struct RescaledClassifierImpl : tc::ref::ImageClassifierImpl {
  using ImageClassifierImpl::ImageClassifierImpl;
  torch::Tensor forward(torch::Tensor x) override {  // (B, 3, H, W)
    x = x * 2.0 - 1.0;
    x = extract_features(x);                          // (B, C, H/2, W/2), recomputed when asked
    return classifier->forward(x.flatten(1));         // (B, classes)
  }
};

class TeamCnnRun : public tc::ref::ReferenceRun {
 protected:
  tc::ref::ImageClassifier build_model() override {
    return tc::ref::make_classifier<RescaledClassifierImpl>(config_.data.classes, config_.data.image_size,
                                                            config_.dropout);
  }
};

}  // namespace team

TC_RECIPE(team::TeamCnnRun, "team_cnn",
          "the reference's training with the team's own forward (a model derived from the reference's "
          "classifier; examples/user_recipe)");
