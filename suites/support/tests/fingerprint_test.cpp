// The training fingerprint (suites/support/fingerprint.h): its digest is SHA-256 of the documented
// byte layout (recomputed here independently), its statistics are the parameters', its losses
// survive as text bit for bit, and one seed gives one fingerprint.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "harness/util/sha256.h"
#include "harness/contract/registry.h"
#include "suites/support/fingerprint.h"

namespace tc {
namespace {

std::string bytes_of(const std::vector<float>& v) {
  std::string s(v.size() * sizeof(float), '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

TEST(Fingerprint, DigestIsSha256OfNameDtypeShapeAndBytesInOrder) {
  const std::vector<float> w{1, 2, 3, 4}, b{-0.5f, 0.25f};
  const NamedTensors params{{"w", torch::tensor(w).reshape({2, 2})}, {"b", torch::tensor(b)}};
  const nlohmann::json f = training_fingerprint("test", {1.0}, params);
  using namespace std::string_literals;
  const std::string layout = "w\0float\0"s + "2x2\0"s + bytes_of(w) + "b\0float\0"s + "2\0"s + bytes_of(b);
  EXPECT_EQ(f["params"]["sha256"], sha256_hex(layout));
  EXPECT_EQ(f["params"]["tensors"], 2);
  EXPECT_EQ(f["params"]["elements"], 6);
  EXPECT_EQ(f["params"]["sum"].get<double>(), 9.75);
  EXPECT_EQ(f["params"]["sum_squares"].get<double>(), 30.3125);
  EXPECT_EQ(f["params"]["l2_norm"].get<double>(), std::sqrt(30.3125));
  EXPECT_EQ(f["params"]["max_abs"].get<double>(), 4.0);
  EXPECT_EQ(f["params"]["non_finite"], 0);
  // The largest tensor first, with its own digest.
  ASSERT_EQ(f["largest"].size(), 2u);
  EXPECT_EQ(f["largest"][0]["name"], "w");
  EXPECT_EQ(f["largest"][0]["shape"], "2x2");
  EXPECT_EQ(f["largest"][0]["sha256"], sha256_hex("w\0float\0"s + "2x2\0"s + bytes_of(w)));
  EXPECT_EQ(f["format"], kFingerprintFormat);
}

TEST(Fingerprint, AViewHashesAsItsValuesNotItsStrides) {
  const at::Tensor t = torch::arange(6, torch::kFloat).reshape({2, 3});
  const nlohmann::json a = training_fingerprint("a", {}, {{"t", t.t()}});              // a transposed view
  const nlohmann::json b = training_fingerprint("b", {}, {{"t", t.t().contiguous()}});  // the same values
  EXPECT_EQ(a["params"]["sha256"], b["params"]["sha256"]);
  const nlohmann::json c = training_fingerprint("c", {}, {{"t", t}});  // other shape: another digest
  EXPECT_NE(a["params"]["sha256"], c["params"]["sha256"]);
}

TEST(Fingerprint, NonFiniteParametersAreCountedNotSummed) {
  const NamedTensors p{{"x", torch::tensor({1.0f, std::numeric_limits<float>::quiet_NaN(), INFINITY, -2.0f})}};
  const nlohmann::json f = training_fingerprint("x", {}, p);
  EXPECT_EQ(f["params"]["non_finite"], 2);
  EXPECT_EQ(f["params"]["sum"].get<double>(), -1.0);
  EXPECT_EQ(f["params"]["max_abs"].get<double>(), 2.0);
}

TEST(Fingerprint, LossesSurviveAsHexTextBitForBit) {
  const std::vector<double> losses{1.3862943649291992, 0.1, -0.0, std::numeric_limits<double>::denorm_min(),
                                   INFINITY, std::nan("")};
  const nlohmann::json f = training_fingerprint("x", losses, {});
  ASSERT_EQ(f["loss_hex"].size(), losses.size());
  EXPECT_EQ(f["steps"], losses.size());
  EXPECT_EQ(f["loss_hex"][0], "0x1.62e43p+0");
  for (size_t i = 0; i < losses.size(); ++i) {
    const std::string text = f["loss_hex"][i].get<std::string>();
    const double back = std::strtod(text.c_str(), nullptr);
    if (std::isnan(losses[i])) {
      EXPECT_TRUE(std::isnan(back)) << text;
    } else {
      EXPECT_EQ(std::memcmp(&back, &losses[i], sizeof back), 0) << text;
    }
  }
}

// One epoch of the suite's reference recipe (registered in the binary) with `seed`.
nlohmann::json reference_fingerprint(int64_t seed) {
  const RecipeInfo* recipe = Registry::global().find_recipe("reference");
  if (recipe == nullptr) throw std::runtime_error("the reference recipe is not registered in this binary");
  std::unique_ptr<Run> run = recipe->make();
  RunOptions o;
  o.seed = seed;
  run->setup(o);
  std::vector<double> losses;
  for (int64_t i = 0; i < run->steps_per_epoch(); ++i) losses.push_back(run->train_step().loss);
  return training_fingerprint("one epoch", losses, run->parameters());
}

TEST(Fingerprint, OneSeedGivesOneFingerprintAnotherSeedAnother) {
  const nlohmann::json a = reference_fingerprint(1234);
  EXPECT_EQ(a, reference_fingerprint(1234));
  const nlohmann::json c = reference_fingerprint(1235);
  EXPECT_NE(a["loss_hex"], c["loss_hex"]);
  EXPECT_NE(a["params"]["sha256"], c["params"]["sha256"]);
}

}  // namespace
}  // namespace tc
