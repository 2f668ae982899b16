// The GradScaler against PyTorch's semantics, on CPU tensors; the autocast guard.
#include <cmath>
#include <limits>
#include <sstream>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "reference/autocast.h"
#include "reference/grad_scaler.h"

namespace tc::ref {
namespace {

struct Fixture {
  at::Tensor p = torch::arange(1.0, 7.0, torch::kFloat32).requires_grad_(true);  // (6)
  torch::optim::SGD opt{std::vector<at::Tensor>{p}, torch::optim::SGDOptions(0.5)};

  // What backward of scale(loss) would leave: `g` times the current scale.
  void set_scaled_grad(GradScaler& s, const at::Tensor& g) {
    at::Tensor one = s.scale(torch::ones({}));  // initialises the scale on first use
    p.mutable_grad() = g * one;
  }
};

TEST(GradScaler, HasPyTorchsDefaults) {
  GradScaler s;
  EXPECT_TRUE(s.is_enabled());
  EXPECT_EQ(s.get_scale(), 65536.0);
  EXPECT_EQ(s.options().growth_factor, 2.0);
  EXPECT_EQ(s.options().backoff_factor, 0.5);
  EXPECT_EQ(s.options().growth_interval, 2000);
  EXPECT_EQ(s.growth_tracker(), 0);
  at::Tensor scaled = s.scale(torch::full({}, 3.0));
  EXPECT_EQ(scaled.item<double>(), 3.0 * 65536.0);
  EXPECT_EQ(s.scale_tensor().scalar_type(), torch::kFloat32);
}

TEST(GradScaler, RejectsFactorsPyTorchRejects) {
  EXPECT_THROW(GradScaler(GradScalerOptions{}.with_growth_factor(1.0)), std::invalid_argument);
  EXPECT_THROW(GradScaler(GradScalerOptions{}.with_backoff_factor(1.0)), std::invalid_argument);
}

// ATen's unscale multiplies by inv_scale = float(1 / double(scale)): bitwise that, also for a
// scale whose reciprocal is not exact in fp32.
TEST(GradScaler, UnscaledGradientsAreBitwiseTheHandComputation) {
  for (double scale : {65536.0, 3.0, 1000.0}) {
    Fixture f;
    GradScaler s;
    s.scale(torch::ones({}));
    s.update(scale);
    at::Tensor g = torch::tensor({1.5f, -2.25f, 1e-3f, 7.0f, 0.1f, -3e4f});
    f.p.mutable_grad() = g.clone();
    s.unscale_(f.opt);
    const at::Tensor inv = torch::full({}, scale, torch::kFloat32).to(torch::kDouble).reciprocal().to(torch::kFloat32);
    const at::Tensor expected = g * inv;  // fp32 multiply
    EXPECT_TRUE(torch::equal(f.p.grad(), expected)) << "scale " << scale << "\n" << f.p.grad() << expected;
  }
}

TEST(GradScaler, SkipsTheStepOnInfAndNanAndBacksOff) {
  for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    Fixture f;
    GradScaler s;
    const at::Tensor before = f.p.detach().clone();
    at::Tensor g = torch::ones({6});
    g[2] = bad;
    f.set_scaled_grad(s, g);
    EXPECT_FALSE(s.step(f.opt));
    EXPECT_TRUE(torch::equal(f.p.detach(), before));
    s.update();
    EXPECT_EQ(s.get_scale(), 32768.0);
    EXPECT_EQ(s.growth_tracker(), 0);
  }
}

TEST(GradScaler, StepsOnFiniteGradientsWithTheUnscaledGradient) {
  Fixture f;
  GradScaler s;
  f.set_scaled_grad(s, torch::full({6}, 0.25));
  EXPECT_TRUE(s.step(f.opt));  // unscale_ inside step
  EXPECT_TRUE(torch::equal(f.p.detach(), torch::arange(1.0, 7.0, torch::kFloat32) - 0.125));
  s.update();
  EXPECT_EQ(s.get_scale(), 65536.0);
  EXPECT_EQ(s.growth_tracker(), 1);
}

TEST(GradScaler, GrowsAfterTheGrowthInterval) {
  Fixture f;
  GradScaler s(GradScalerOptions{}.with_growth_interval(3));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(s.get_scale(), 65536.0) << i;
    f.set_scaled_grad(s, torch::full({6}, 0.01));
    EXPECT_TRUE(s.step(f.opt));
    s.update();
  }
  EXPECT_EQ(s.get_scale(), 131072.0);
  EXPECT_EQ(s.growth_tracker(), 0);
}

// As PyTorch's test_grad_scaling_update_scale: scale == init * growth^g * backoff^s throughout.
TEST(GradScaler, ScaleIsInitTimesGrowthToTheGrowthsTimesBackoffToTheSkips) {
  Fixture f;
  const int64_t interval = 2;
  GradScaler s(GradScalerOptions{}.with_growth_interval(interval));
  const std::vector<bool> inf_at = {false, false, true, false, false, false, true, true, false, false, false};
  int growths = 0, skips = 0, tracker = 0;
  for (size_t t = 0; t < inf_at.size(); ++t) {
    at::Tensor g = torch::full({6}, 0.01);
    if (inf_at[t]) g[0] = std::numeric_limits<float>::infinity();
    f.set_scaled_grad(s, g);
    EXPECT_EQ(s.step(f.opt), !inf_at[t]) << t;
    s.update();
    if (inf_at[t]) {
      ++skips;
      tracker = 0;
    } else if (++tracker == interval) {
      ++growths;
      tracker = 0;
    }
    EXPECT_EQ(s.get_scale(), 65536.0 * std::pow(2.0, growths) * std::pow(0.5, skips)) << "step " << t;
    EXPECT_EQ(s.growth_tracker(), tracker) << "step " << t;
  }
  EXPECT_EQ(skips, 3);
  EXPECT_EQ(growths, 3);
}

TEST(GradScaler, UnscaleOncePerStepAsPyTorch) {
  Fixture f;
  GradScaler s;
  f.set_scaled_grad(s, torch::ones({6}));
  s.unscale_(f.opt);
  EXPECT_THROW(s.unscale_(f.opt), std::logic_error);
  EXPECT_TRUE(s.step(f.opt));
  EXPECT_THROW(s.unscale_(f.opt), std::logic_error);  // after step
  EXPECT_THROW(s.step(f.opt), std::logic_error);      // twice
  s.update();
  f.set_scaled_grad(s, torch::ones({6}));
  EXPECT_NO_THROW(s.unscale_(f.opt));  // a new iteration
}

TEST(GradScaler, RefusesFp16GradientsAndUseBeforeScale) {
  at::Tensor p = torch::ones({4}, torch::kHalf).requires_grad_(true);
  torch::optim::SGD opt({p}, torch::optim::SGDOptions(0.1));
  GradScaler fresh;
  EXPECT_THROW(fresh.unscale_(opt), std::logic_error);  // scale() never called
  GradScaler s;
  s.scale(torch::ones({}));
  p.mutable_grad() = torch::ones({4}, torch::kHalf);
  EXPECT_THROW(s.unscale_(opt), std::invalid_argument);
}

TEST(GradScaler, DisabledIsATransparentPassThrough) {
  Fixture f;
  GradScaler s(GradScalerOptions{}.with_enabled(false));
  at::Tensor loss = torch::full({}, 2.0);
  EXPECT_TRUE(s.scale(loss).is_same(loss));
  f.p.mutable_grad() = torch::full({6}, 0.5);
  EXPECT_TRUE(s.step(f.opt));
  s.update();
  EXPECT_EQ(s.get_scale(), 1.0);
  EXPECT_FALSE(s.state_dict().has_value());
}

GradScaler round_trip(const GradScaler& from, GradScalerOptions into_options) {
  torch::serialize::OutputArchive out;
  from.save(out);
  std::stringstream bytes;
  out.save_to(bytes);
  torch::serialize::InputArchive in;
  in.load_from(bytes);
  GradScaler into(into_options);
  into.load(in);
  return into;
}

TEST(GradScaler, StateRoundTripsThroughAnArchiveAndContinuesTheSame) {
  Fixture f;
  GradScaler s(GradScalerOptions{}.with_growth_interval(5).with_growth_factor(4.0).with_backoff_factor(0.25));
  for (bool inf : {true, false, false}) {
    at::Tensor g = torch::ones({6});
    if (inf) g[1] = std::numeric_limits<float>::infinity();
    f.set_scaled_grad(s, g);
    s.step(f.opt);
    s.update();
  }
  GradScaler r = round_trip(s, GradScalerOptions{});  // defaults replaced by the saved ones
  auto a = s.state_dict(), b = r.state_dict();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(b->scale, 16384.0);
  EXPECT_EQ(b->scale, a->scale);
  EXPECT_EQ(b->growth_tracker, 2);
  EXPECT_EQ(b->growth_factor, 4.0);
  EXPECT_EQ(b->backoff_factor, 0.25);
  EXPECT_EQ(b->growth_interval, 5);
  // Both continue alike, the original and the restored one, on the same steps: a clean step, an
  // inf step (skipped, backs off), then clean steps up to the interval (grows by 4); after each,
  // the same scale, growth tracker and parameters.
  Fixture on_s, on_r;
  int step = 0;
  for (bool inf : {false, true, false, false, false, false, false}) {
    ++step;
    at::Tensor grad = torch::full({6}, 0.5);
    if (inf) grad[2] = std::numeric_limits<float>::infinity();
    on_s.set_scaled_grad(s, grad);
    on_r.set_scaled_grad(r, grad);
    s.step(on_s.opt);
    r.step(on_r.opt);
    s.update();
    r.update();
    EXPECT_EQ(r.get_scale(), s.get_scale()) << "step " << step;
    EXPECT_EQ(r.growth_tracker(), s.growth_tracker()) << "step " << step;
    EXPECT_TRUE(torch::equal(on_r.p, on_s.p)) << "step " << step;
  }
  // 16384 -> (clean: tracker 3) -> inf: 4096, tracker 0 -> five clean steps: grows at the fifth.
  EXPECT_EQ(s.get_scale(), 16384.0);
  EXPECT_EQ(s.growth_tracker(), 0);
}

TEST(GradScaler, AnEnabledScalerRefusesTheEmptyStateOfADisabledOne) {
  GradScaler disabled(GradScalerOptions{}.with_enabled(false));
  EXPECT_THROW(round_trip(disabled, GradScalerOptions{}), std::runtime_error);
  EXPECT_NO_THROW(round_trip(disabled, GradScalerOptions{}.with_enabled(false)));
}

TEST(Autocast, GuardCastsMatmulsToBf16OnCpuAndRestoresTheState) {
  const at::Tensor a = torch::randn({4, 4}), b = torch::randn({4, 4});
  ASSERT_FALSE(AutocastGuard::enabled(c10::kCPU));
  const c10::ScalarType before = AutocastGuard::dtype(c10::kCPU);
  {
    AutocastGuard outer(c10::kCPU, c10::kBFloat16);
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
    {
      AutocastGuard inner(c10::kCPU, c10::kHalf);
      EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kHalf);
      AutocastGuard off(c10::kCPU, c10::kHalf, /*enabled=*/false);
      EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat32);
    }
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
    // Losses run in fp32 under autocast.
    EXPECT_EQ(torch::nn::functional::cross_entropy(torch::mm(a, b), torch::zeros({4}, torch::kLong)).scalar_type(),
              torch::kFloat32);
  }
  EXPECT_FALSE(AutocastGuard::enabled(c10::kCPU));
  EXPECT_EQ(AutocastGuard::dtype(c10::kCPU), before);
  EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat32);
}

// The cast cache holds the bf16 copy of a weight (a leaf that requires grad) for the region;
// leaving the region must drop it, or the next region would multiply by the old weight.
TEST(Autocast, LeavingTheRegionDropsTheWeightCastCache) {
  at::Tensor w = torch::ones({4, 4}).requires_grad_(true);
  const at::Tensor x = torch::ones({1, 4});
  at::Tensor first, second;
  {
    AutocastGuard ac(c10::kCPU, c10::kBFloat16);
    first = torch::mm(x, w);
  }
  {
    torch::NoGradGuard no_grad;
    w.mul_(2);
  }
  {
    AutocastGuard ac(c10::kCPU, c10::kBFloat16);
    second = torch::mm(x, w);
  }
  EXPECT_EQ(first.select(1, 0).item<float>(), 4.0f);
  EXPECT_EQ(second.select(1, 0).item<float>(), 8.0f);
}

}  // namespace
}  // namespace tc::ref
