// distributed on recipes written otherwise than the reference (run under torchrun by the runner, as
// the command line runs it): an MLP and a model that is not a Sequential pass every promise; a
// resume where only rank 0 reads the checkpoint is caught by resume_every_rank alone.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "reference/distributed_run.h"
#include "suites/tests/test_recipes.h"

namespace tc {
namespace {

// A two-layer MLP on the flattened image instead of the reference's convolution.
class MlpDist : public ref::DistributedReference {
 protected:
  std::shared_ptr<torch::nn::Module> build_model() const override {
    torch::manual_seed(static_cast<uint64_t>(options_.seed));  // every rank builds the same weights
    namespace nn = torch::nn;
    return std::make_shared<nn::SequentialImpl>(nn::Flatten(), nn::Linear(3 * 8 * 8, 32), nn::ReLU(),
                                                nn::Linear(32, 4));
  }
};

// A module of its own (not a Sequential), with its forward.
struct TinyNetImpl : torch::nn::Module {
  TinyNetImpl()
      : conv(register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3).padding(1)))),
        fc(register_module("fc", torch::nn::Linear(4 * 4 * 4, 4))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return fc->forward(torch::max_pool2d(torch::relu(conv->forward(x)), 2).flatten(1));  // (B, 4)
  }
  torch::nn::Conv2d conv;
  torch::nn::Linear fc;
};

class TinyNetDist : public ref::DistributedReference {
 protected:
  std::shared_ptr<torch::nn::Module> build_model() const override {
    torch::manual_seed(static_cast<uint64_t>(options_.seed));
    return std::make_shared<TinyNetImpl>();
  }
  at::Tensor forward(torch::nn::Module& model, const at::Tensor& x) override {
    return dynamic_cast<TinyNetImpl&>(model).forward(x);
  }
};

// Fail: only rank 0 reads the checkpoint; the others re-attach gradient averaging, whose broadcast
// gives them rank 0's weights, but keep their fresh optimizer state and sampler position.
class RankZeroOnlyLoadsDist : public ref::DistributedReference {
 public:
  void load_checkpoint(const std::string& path) override {
    if (group_->rank() == 0) {
      DistributedReference::load_checkpoint(path);
      return;
    }
    reducer_.reset();
    attach_gradient_averaging();
  }
};

template <typename Dist>
class With : public ref::ReferenceRecipe {
 public:
  std::unique_ptr<tc::DistributedRecipe> make_distributed() const override { return std::make_unique<Dist>(); }
};

using testing_recipes::promise_status;
using testing_recipes::run_one;

TEST(DistributedRecipes, ModelsWrittenOtherwisePassEveryPromise) {
  for (const char* recipe : {"mlp_dist", "tiny_net_dist"}) {
    const Cell c = run_one("distributed", recipe);
    std::cout << recipe << " [" << to_string(c.verdict) << "]: " << c.evidence << "\n";
    EXPECT_EQ(c.outcome, Outcome::kPass) << recipe << ": " << c.evidence;
    EXPECT_EQ(promise_status(c, "resume_every_rank"), "held") << c.evidence;
  }
}

TEST(DistributedRecipes, AResumeOnlyRankZeroReadsIsCaught) {
  const Cell c = run_one("distributed", "rank_zero_only_loads");
  std::cout << c.evidence << "\n";
  EXPECT_EQ(c.outcome, Outcome::kFail) << c.evidence;
  EXPECT_EQ(promise_status(c, "resume_every_rank"), "broken") << c.evidence;
  for (const char* p : {"ddp_gradients", "replicas_identical", "sampler", "rank0_writes", "checkpoint_loads_unwrapped"}) {
    EXPECT_EQ(promise_status(c, p), "held") << p << ": " << c.evidence;
  }
}

}  // namespace
}  // namespace tc

TC_TEST_RECIPE(tc::With<tc::MlpDist>, "mlp_dist", "distributed: a two-layer MLP");
TC_TEST_RECIPE(tc::With<tc::TinyNetDist>, "tiny_net_dist", "distributed: a model that is not a Sequential");
TC_TEST_RECIPE(tc::With<tc::RankZeroOnlyLoadsDist>, "rank_zero_only_loads",
               "distributed: only rank 0 reads the checkpoint on resume");
