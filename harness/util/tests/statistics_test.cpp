#include <cmath>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "harness/util/statistics.h"
#include "harness/testing/test_paths.h"

namespace tc::stats {
namespace {

nlohmann::json load_fixture() {
  std::ifstream in(std::string(tc::test_paths::source_dir()) + "/harness/tests/fixtures/mwu_scipy.json");
  EXPECT_TRUE(in.good()) << "fixture missing";
  return nlohmann::json::parse(in);
}

// The fixture was generated once by make_mwu_fixtures.py from scipy.stats.mannwhitneyu.
TEST(MannWhitneyU, MatchesScipyOnEveryFixtureCase) {
  const nlohmann::json f = load_fixture();
  ASSERT_GE(f["cases"].size(), 20u);
  double max_du = 0.0, max_dp = 0.0;
  for (const auto& c : f["cases"]) {
    const auto x = c["x"].get<std::vector<double>>();
    const auto y = c["y"].get<std::vector<double>>();
    const MwuResult r = mann_whitney_u(x, y);
    SCOPED_TRACE(c["name"].get<std::string>());
    EXPECT_NEAR(r.u, c["u"].get<double>(), 1e-6);
    EXPECT_NEAR(r.p, c["p"].get<double>(), 1e-6);
    EXPECT_STREQ(to_string(r.method), c["method"].get<std::string>().c_str());
    max_du = std::max(max_du, std::abs(r.u - c["u"].get<double>()));
    max_dp = std::max(max_dp, std::abs(r.p - c["p"].get<double>()));
  }
  std::printf("SciPy %s cross-check: %zu cases, max |dU| = %.3g, max |dp| = %.3g\n",
              f["scipy"].get<std::string>().c_str(), f["cases"].size(), max_du, max_dp);
}

TEST(MannWhitneyU, IsSymmetricInItsSamples) {
  const std::vector<double> a{1, 4, 2, 8, 5}, b{3, 9, 7, 6, 10, 11};
  const MwuResult ab = mann_whitney_u(a, b), ba = mann_whitney_u(b, a);
  EXPECT_DOUBLE_EQ(ab.p, ba.p);
  EXPECT_DOUBLE_EQ(ab.u + ba.u, 30.0);
}

TEST(MannWhitneyU, RejectsAnEmptySample) {
  EXPECT_THROW(mann_whitney_u({}, {1.0}), std::invalid_argument);
}

TEST(MannWhitneyU, SmallestExactPIsCompleteSeparation) {
  EXPECT_NEAR(smallest_exact_p(2, 2), 1.0 / 3.0, 1e-12);
  EXPECT_NEAR(smallest_exact_p(5, 5), 2.0 / 252.0, 1e-12);
  EXPECT_NEAR(mann_whitney_u({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}).p, smallest_exact_p(5, 5), 1e-12);
}

TEST(Statistics, MedianAndCv) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(median({4, 1, 2, 3}), 2.5);
  EXPECT_TRUE(std::isnan(median({})));
  // mean 2, sample sd 1 -> cv 0.5
  EXPECT_DOUBLE_EQ(coefficient_of_variation({1, 2, 3}), 0.5);
  EXPECT_DOUBLE_EQ(coefficient_of_variation({7}), 0.0);
}

}  // namespace
}  // namespace tc::stats
