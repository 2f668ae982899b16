// Broken variant the init check must catch ("initialise weights explicitly ... rather than trusting
// the defaults").
#include "harness/contract/registry.h"
#include "reference/reference_run.h"

namespace tc::variants {

// The model keeps LibTorch's default initialisation (init_weights never applied).
class DefaultInit : public ref::ReferenceRun {
 protected:
  ref::ImageClassifier build_model() override {
    return ref::ImageClassifier(config_.data.classes, config_.data.image_size, config_.dropout);
  }
};

}  // namespace tc::variants

TC_RECIPE(tc::variants::DefaultInit, "default_init",
          "trusts the layers' default initialisation")
    ->MustBeCaughtBy({"init"})
    ->Breaks("init", {"declared_init"});
