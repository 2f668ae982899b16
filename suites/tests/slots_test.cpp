// The recipe API's slots (reference/reference_run.h), each used by a correct recipe of the kind
// teams write: every check must pass it. The variants that break what the slots touch (the
// optimisation step, the checkpoint's optimizer, schedule and sampler state) are built on those
// slots and must still be caught.
//
//   adamw_cosine_uneven   AdamW, linear warm-up + cosine decay, 100 samples in batches of 16 with
//                         drop_last off (7 batches an epoch, the last of 4)
//   sequential_adam       the model any Module (a Sequential with model_forward and declared_init),
//                         Adam, a resumable torch::optim::StepLR
//   block_sampler         a sampler of its own: blocks of 4 consecutive samples in a shuffled order
#include <cmath>
#include <set>
#include <tuple>

#include <gtest/gtest.h>

#include <torch/torch.h>

#include "harness/contract/registry.h"
#include "harness/contract/scratch.h"
#include "harness/runner.h"
#include "reference/optimizer_state.h"
#include "reference/reference_run.h"
#include "reference/schedule.h"
#include "suites/resume_equality/variants.h"
#include "suites/step_hygiene/variants.h"
#include "suites/tests/test_recipes.h"

namespace tc {
namespace {

using testing_recipes::expect_nothing_broken;
using testing_recipes::promise_status;
using testing_recipes::run_one;

ref::TrainConfig uneven_config() {
  ref::TrainConfig c;
  c.data.size = 100;
  c.batch_size = 16;
  c.drop_last = false;
  c.lr = 2e-3;
  c.weight_decay = 0.05;
  return c;
}

class AdamWCosineUneven : public ref::ReferenceRun {
 public:
  AdamWCosineUneven() : ReferenceRun(uneven_config()) {}

 protected:
  std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::vector<at::Tensor>& ps) override {
    return std::make_unique<torch::optim::AdamW>(
        ps, torch::optim::AdamWOptions(config_.lr).weight_decay(config_.weight_decay));
  }
  std::unique_ptr<ref::Schedule> make_schedule(torch::optim::Optimizer& o) override {
    return std::make_unique<ref::WarmupCosine>(o, /*warmup_steps=*/3, /*total_steps=*/4 * steps_per_epoch(),
                                               /*floor_ratio=*/0.1);
  }
};

// Conv-BN-ReLU-MaxPool-Flatten-Dropout-Linear as one Sequential, initialised explicitly.
class SequentialAdam : public ref::ReferenceRun {
 protected:
  std::shared_ptr<torch::nn::Module> make_model() override {
    namespace nn = torch::nn;
    const int64_t s = config_.data.image_size;
    nn::Sequential m(nn::Conv2d(nn::Conv2dOptions(3, 8, 3).padding(1)),  // (B, 8, S, S)
                     nn::BatchNorm2d(8), nn::ReLU(), nn::MaxPool2d(2),     // (B, 8, S/2, S/2)
                     nn::Flatten(), nn::Dropout(0.3),
                     nn::Linear(8 * (s / 2) * (s / 2), config_.data.classes));  // (B, classes)
    torch::NoGradGuard no_grad;
    for (const auto& p : m->named_parameters()) {
      if (p.value().dim() == 4) nn::init::kaiming_normal_(p.value(), 0.0, torch::kFanOut, torch::kReLU);
      else if (p.value().dim() == 2) nn::init::normal_(p.value(), 0.0, 0.02);
      else if (p.key() == "1.weight") nn::init::ones_(p.value());
      else nn::init::zeros_(p.value());
    }
    return m.ptr();
  }
  at::Tensor model_forward(const at::Tensor& x) override {
    return std::dynamic_pointer_cast<torch::nn::SequentialImpl>(module_)->forward(x);
  }
  std::vector<InitSpec> declared_init() const override {
    using K = InitSpec::Kind;
    std::vector<InitSpec> specs;
    for (const auto& p : module_->named_parameters()) {
      const at::Tensor& t = p.value();
      if (t.dim() == 4) {
        specs.push_back({p.key(), K::kNormal, 0.0, std::sqrt(2.0 / static_cast<double>(t.size(0) * t.size(2) * t.size(3)))});
      } else if (t.dim() == 2) {
        specs.push_back({p.key(), K::kNormal, 0.0, 0.02});
      } else {
        specs.push_back({p.key(), K::kConstant, p.key() == "1.weight" ? 1.0 : 0.0, 0.0});
      }
    }
    return specs;
  }
  std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::vector<at::Tensor>& ps) override {
    return std::make_unique<torch::optim::Adam>(ps, torch::optim::AdamOptions(1e-3));
  }
  std::unique_ptr<ref::Schedule> make_schedule(torch::optim::Optimizer& o) override {
    return std::make_unique<ref::Resumable<torch::optim::StepLR>>(o, 2, 0.5);
  }
};

// An MLP without normalisation layers (no running statistics) trained by plain SGD (no optimizer
// state): correct code that a check assuming the reference's BatchNorm and momentum flagged (found
// through a Python recipe of the same shape: eval_mode read "running stats did not move",
// resume_equality "no optimizer state to compare").
class PlainSgdMlp : public ref::ReferenceRun {
 protected:
  std::shared_ptr<torch::nn::Module> make_model() override {
    namespace nn = torch::nn;
    const int64_t s = config_.data.image_size;
    nn::Sequential m(nn::Flatten(), nn::Linear(3 * s * s, 32), nn::ReLU(), nn::Dropout(0.2),  // (B, 32)
                     nn::Linear(32, config_.data.classes));                                     // (B, classes)
    return m.ptr();
  }
  at::Tensor model_forward(const at::Tensor& x) override {
    return std::dynamic_pointer_cast<torch::nn::SequentialImpl>(module_)->forward(x);
  }
  std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::vector<at::Tensor>& ps) override {
    return std::make_unique<torch::optim::SGD>(ps, torch::optim::SGDOptions(0.05));  // no momentum: no state
  }
};

// Blocks of 4 consecutive samples, the blocks in an order drawn from the loader's generator each
// epoch, and the epoch's augmentation seed drawn after it. (Its first version returned a constant
// epoch seed: data_saturation caught it, "batch 0 of epoch 1 got epoch 0's augmentation again".)
class BlockSampler : public testing_recipes::DrawnOrderSampler {
 public:
  using DrawnOrderSampler::DrawnOrderSampler;

 protected:
  at::Tensor draw(at::Generator& g) override {
    const at::Tensor blocks = torch::randperm(n_ / 4, g, torch::kLong);           // (n/4)
    return (blocks.unsqueeze(1) * 4 + torch::arange(4, torch::kLong)).flatten();  // (n)
  }
};

class BlockSampled : public ref::ReferenceRun {
 protected:
  std::unique_ptr<ref::Sampler> make_sampler(int64_t n, at::Generator g) override {
    return std::make_unique<BlockSampler>(n, config_.batch_size, std::move(g));
  }
};

}  // namespace
}  // namespace tc

TC_TEST_RECIPE(tc::AdamWCosineUneven, "adamw_cosine_uneven",
               "AdamW, warm-up + cosine schedule, an uneven last batch (slots_test)");
TC_TEST_RECIPE(tc::SequentialAdam, "sequential_adam", "a Sequential model, Adam, StepLR (slots_test)");
TC_TEST_RECIPE(tc::BlockSampled, "block_sampler", "a sampler of its own (slots_test)");
TC_TEST_RECIPE(tc::PlainSgdMlp, "plain_sgd_mlp", "an MLP without BatchNorm, SGD without momentum (slots_test)");
// The variants on the slots.
TC_TEST_RECIPE(tc::variants::NoZeroGrad<tc::AdamWCosineUneven>, "adamw_no_zero_grad", "no_zero_grad on AdamW");
TC_TEST_RECIPE(tc::variants::ClipAfterStep<tc::AdamWCosineUneven>, "adamw_clip_after_step", "clip_after_step on AdamW");
TC_TEST_RECIPE(tc::variants::ZeroGradBeforeStep<tc::AdamWCosineUneven>, "adamw_zero_grad_before_step",
               "zero_grad_before_step on AdamW");
TC_TEST_RECIPE(tc::variants::WeightsOnlyCheckpoint<tc::AdamWCosineUneven>, "adamw_weights_only_checkpoint",
               "weights_only_checkpoint on AdamW");
namespace tc {
namespace {
using AdamWNoOptimizer = variants::Without<variants::kOptimizer, AdamWCosineUneven>;
using AdamWNoScheduler = variants::Without<variants::kScheduler, AdamWCosineUneven>;
using AdamWNoRng = variants::Without<variants::kRng, AdamWCosineUneven>;
using AdamWNoSampler = variants::Without<variants::kSampler, AdamWCosineUneven>;
using BlockSamplerNoPosition = variants::Without<variants::kSampler, BlockSampled>;
}  // namespace
}  // namespace tc
TC_TEST_RECIPE(tc::AdamWNoOptimizer, "adamw_no_optimizer_state",
               "no_optimizer_state on AdamW");
TC_TEST_RECIPE(tc::AdamWNoScheduler, "adamw_no_scheduler_state",
               "no_scheduler_state on a warm-up + cosine schedule");
TC_TEST_RECIPE(tc::AdamWNoRng, "adamw_no_rng_state",
               "no_rng_state on AdamW");
TC_TEST_RECIPE(tc::AdamWNoSampler, "adamw_no_sampler_position",
               "no_sampler_position with an uneven last batch");
TC_TEST_RECIPE(tc::BlockSamplerNoPosition, "block_sampler_no_position",
               "no_sampler_position on a sampler of its own");

namespace tc {
namespace {

TEST(Slots, AnUnevenLastBatchIsTrainedAndDropLastDropsIt) {
  AdamWCosineUneven run;
  run.setup(RunOptions{});
  ASSERT_EQ(run.steps_per_epoch(), 7);  // 100 = 6 x 16 + 4
  std::vector<int64_t> sizes, epochs;
  for (int i = 0; i < 8; ++i) {
    epochs.push_back(run.train_step().epoch);
    sizes.push_back(run.last_batch().second.size(0));
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{16, 16, 16, 16, 16, 16, 4, 16}));
  EXPECT_EQ(epochs, (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, 1}));

  ref::TrainConfig c = uneven_config();
  c.drop_last = true;
  ref::ReferenceRun dropping(c);
  dropping.setup(RunOptions{});
  EXPECT_EQ(dropping.steps_per_epoch(), 6);
}

TEST(Slots, WarmupCosineSetsEveryStepsRateAndResumesFromItsCount) {
  AdamWCosineUneven run;
  run.setup(RunOptions{});
  const int64_t total = 4 * 7;
  std::vector<double> lrs;
  for (int i = 0; i < 10; ++i) lrs.push_back(run.train_step().lr);
  const double base = 2e-3;
  EXPECT_DOUBLE_EQ(lrs[0], base / 3);
  EXPECT_DOUBLE_EQ(lrs[2], base);
  const double progress = (9.0 - 3.0) / static_cast<double>(total - 3);
  EXPECT_NEAR(lrs[9], base * (0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * progress))), 1e-15);
  for (int i = 4; i < 10; ++i) EXPECT_LT(lrs[i], lrs[i - 1]) << "step " << i;

  const Scratch scratch("tc-slots-test-");
  const std::string path = scratch.file("slots_warmup_cosine.pt");
  run.save_checkpoint(path);
  const double next = run.train_step().lr;
  AdamWCosineUneven resumed;
  resumed.setup(RunOptions{});
  resumed.load_checkpoint(path);
  EXPECT_EQ(resumed.train_step().lr, next);
}

TEST(Slots, OptimizerStateNamesEveryBufferOfAdamW) {
  AdamWCosineUneven run;
  run.setup(RunOptions{});
  run.train_step();
  const NamedTensors state = run.optimizer_state();
  std::set<std::string> names;
  for (const auto& [n, t] : state) names.insert(n);
  for (const auto& [n, p] : run.parameters()) {
    for (const char* b : {".exp_avg", ".exp_avg_sq", ".step"}) EXPECT_TRUE(names.count(n + b)) << n << b;
  }
  EXPECT_EQ(state.size(), 3 * run.parameters().size());
}

// Every check on the AdamW + cosine + uneven-last-batch recipe: nothing broken (timing promises
// aside, as for every correct recipe of the tests), no cell in error.
// Skipped only where the cell cannot apply to a single-process C++ recipe: distributed (the recipe
// is no DistributedProvider); torch_compile and fsdp judge Python recipes only and give no cell.
TEST(Slots, AdamWCosineUnevenPassesEveryCheck) {
  const std::set<std::string> may_skip = {"distributed"};
  int judged = 0;
  for (const CheckInfo& check : Registry::global().checks()) {
    if (!check.judges_language("c++")) continue;  // torch_compile, fsdp: no cell for a C++ recipe
    const Cell c = run_one(check.name, "adamw_cosine_uneven");
    if (c.verdict == Verdict::kSkipped) {
      std::cout << check.name << " / adamw_cosine_uneven [skipped]: " << c.evidence << "\n";
      EXPECT_TRUE(may_skip.count(check.name)) << check.name << " skipped: " << c.evidence;
      continue;
    }
    ++judged;
    expect_nothing_broken(c, check.name, "adamw_cosine_uneven");  // timing promises aside
    // An error only where a timing promise stayed undecided on a loaded machine (amp's protocol
    // says so: "too noisy to judge"); never from a promise about what the recipe computes.
    if (c.verdict == Verdict::kError) {
      EXPECT_NE(c.evidence.find("too noisy to judge"), std::string::npos) << check.name << ": " << c.evidence;
    }
  }
  EXPECT_GE(judged, 13);
}

TEST(Slots, AnyModuleModelPassesTheChecksThatJudgeIt) {
  for (const char* check : {"init", "registration", "step_hygiene", "resume_equality", "eval_mode",
                            "checkpoint_safety", "autograd_inplace", "shapes", "device_agnostic", "reproducibility"}) {
    const Cell c = run_one(check, "sequential_adam");
    expect_nothing_broken(c, check, "sequential_adam");
    EXPECT_EQ(c.verdict, Verdict::kOk) << check << ": " << c.evidence;
  }
}

// No running statistics to see moving, no optimizer state to compare: nothing to judge there, not a fault.
TEST(Slots, AModelWithoutBatchNormAndAStatelessOptimizerPass) {
  for (const char* check : {"eval_mode", "resume_equality", "reproducibility", "step_hygiene", "registration"}) {
    const Cell c = run_one(check, "plain_sgd_mlp");
    expect_nothing_broken(c, check, "plain_sgd_mlp");
    EXPECT_EQ(c.verdict, Verdict::kOk) << check << ": " << c.evidence;
  }
  EXPECT_TRUE(run_one("eval_mode", "plain_sgd_mlp").metrics["next_epoch_running_stats_moved"].is_null());
}

TEST(Slots, AnOwnSamplerPassesAndItsPositionIsChecked) {
  for (const char* check : {"resume_equality", "reproducibility", "data_saturation"}) {
    expect_nothing_broken(run_one(check, "block_sampler"), check, "block_sampler");
  }
  EXPECT_EQ(promise_status(run_one("resume_equality", "block_sampler_no_position"), "resume_bitwise"), "broken");
}

TEST(Slots, VariantsBuiltOnTheSlotsAreCaught) {
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"adamw_no_zero_grad", "step_hygiene", "fresh_gradients"},
      {"adamw_clip_after_step", "step_hygiene", "clip_between_backward_and_step"},
      {"adamw_zero_grad_before_step", "step_hygiene", "fresh_gradients"},
      {"adamw_weights_only_checkpoint", "resume_equality", "resume_bitwise"},
      {"adamw_no_optimizer_state", "resume_equality", "resume_bitwise"},
      {"adamw_no_scheduler_state", "resume_equality", "resume_bitwise"},
      {"adamw_no_rng_state", "resume_equality", "resume_bitwise"},
      {"adamw_no_sampler_position", "resume_equality", "resume_bitwise"},
  };
  for (const auto& [recipe, check, promise] : cases) {
    const Cell c = run_one(check, recipe);
    std::cout << check << " / " << recipe << " [" << to_string(c.verdict) << "]: " << c.evidence << "\n";
    EXPECT_EQ(c.verdict, Verdict::kFail) << recipe << ": " << c.evidence;
    EXPECT_EQ(promise_status(c, promise), "broken") << recipe << ": " << c.evidence;
  }
}

}  // namespace
}  // namespace tc
