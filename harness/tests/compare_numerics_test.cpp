// compare's numerics: training fingerprints of two reports classified identical / drifted /
// diverged / incomparable / not recorded / missing, and --numerics deciding whether they gate.
// The fingerprints are written here by hand in the format of suites/support/fingerprint.h.
#include <cfloat>
#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>

#include "harness/compare.h"
#include "harness/compare_text.h"

namespace tc {
namespace {

using nlohmann::json;

std::string hex(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

// A fingerprint of `losses` and parameters summed up as sha / l2 / max_abs (100 elements in 2 tensors).
json print(const std::vector<double>& losses, const std::string& sha = "aa", double l2 = 3.0, double max_abs = 0.5) {
  json h = json::array();
  for (double l : losses) h.push_back(hex(l));
  return {{"format", "torchconform.fingerprint/1"},
          {"run", "test"},
          {"steps", losses.size()},
          {"loss_hex", h},
          {"params", {{"tensors", 2}, {"elements", 100}, {"sha256", sha}, {"sum", 1.0}, {"sum_squares", l2 * l2},
                      {"l2_norm", l2}, {"max_abs", max_abs}, {"non_finite", 0}}},
          {"largest", json::array()}};
}

// n float32 ulps above x (x a float32 number).
double ulps_above(double x, int n) {
  float f = static_cast<float>(x);
  for (int i = 0; i < n; ++i) f = std::nextafter(f, INFINITY);
  return f;
}

const std::vector<double> kLosses{1.5, 1.25, 1.0, 0.875};  // float32 numbers, as a float32 loss gives

TEST(Numerics, SameBitsAndDigestAreIdentical) {
  NumericsChange n = compare_fingerprints(print(kLosses), print(kLosses), kNumericsTolerance);
  EXPECT_EQ(n.status, NumericsStatus::kIdentical);
  EXPECT_TRUE(n.losses_bitwise_equal);
  EXPECT_TRUE(n.params_bitwise_equal);
  EXPECT_EQ(n.steps, 4u);
}

TEST(Numerics, DifferencesOfRoundingSizeAreDriftNamingTheFirstStepBeyondFloatRounding) {
  std::vector<double> next = kLosses;
  next[1] = ulps_above(next[1], 2);  // within 4 ulps: rounding
  next[2] = ulps_above(next[2], 8);  // beyond 4 ulps, far within 2^-10
  NumericsChange n = compare_fingerprints(print(kLosses), print(next, "bb", 3.0 * (1 + 1e-6)), kNumericsTolerance);
  EXPECT_EQ(n.status, NumericsStatus::kDrifted);
  ASSERT_TRUE(n.first_difference.has_value());  // step 1 differs, by rounding only
  EXPECT_EQ(*n.first_difference, 1u);
  EXPECT_EQ(n.first_next, next[1]);
  ASSERT_TRUE(n.first_beyond_rounding.has_value());
  EXPECT_EQ(*n.first_beyond_rounding, 2u);
  EXPECT_NE(describe_numerics(n).find("losses first differ at step 1 (0x1.4p+0 vs 0x1.400004p+0); first step "
                                      "beyond float rounding: 2 (1 vs 1.00000095)"),
            std::string::npos)
      << describe_numerics(n);
  EXPECT_EQ(n.rounding_base, 1.0);
  EXPECT_EQ(n.rounding_next, next[2]);
  EXPECT_FALSE(n.first_beyond_tolerance.has_value());
  // The largest relative difference: the parameters' L2 norm (1e-6) beats step 2 (8 ulps of 1: 9.5e-7).
  EXPECT_EQ(n.max_rel_where, "params.l2_norm");
  EXPECT_NEAR(n.max_rel_diff, 1e-6, 1e-9);
}

TEST(Numerics, ALossBeyondTheToleranceDivergesAtThatStepWithBothValues) {
  std::vector<double> next = kLosses;
  next[1] = ulps_above(next[1], 8);
  next[3] = 0.875 * 1.01;
  NumericsChange n = compare_fingerprints(print(kLosses), print(next, "bb"), kNumericsTolerance);
  EXPECT_EQ(n.status, NumericsStatus::kDiverged);
  ASSERT_TRUE(n.first_beyond_tolerance.has_value());
  EXPECT_EQ(*n.first_beyond_tolerance, 3u);
  EXPECT_EQ(n.diverged_base, 0.875);
  EXPECT_EQ(n.diverged_next, 0.875 * 1.01);
  EXPECT_EQ(*n.first_beyond_rounding, 1u);
  EXPECT_EQ(n.max_rel_where, "step 3");
  EXPECT_NEAR(n.max_rel_diff, 0.01 / 1.01, 1e-12);
}

TEST(Numerics, EqualLossesWithParametersBeyondTheToleranceDiverge) {
  NumericsChange n = compare_fingerprints(print(kLosses), print(kLosses, "bb", 3.03), kNumericsTolerance);
  EXPECT_EQ(n.status, NumericsStatus::kDiverged);
  EXPECT_TRUE(n.losses_bitwise_equal);
  EXPECT_FALSE(n.first_beyond_tolerance.has_value());
  EXPECT_FALSE(n.first_beyond_rounding.has_value());
  EXPECT_FALSE(n.first_difference.has_value());
  EXPECT_NE(n.detail.find("L2 norm 3 vs 3.03"), std::string::npos) << n.detail;
}

TEST(Numerics, EqualLossesWithOtherParameterBytesWithinTheToleranceDrift) {
  NumericsChange n = compare_fingerprints(print(kLosses), print(kLosses, "bb"), kNumericsTolerance);
  EXPECT_EQ(n.status, NumericsStatus::kDrifted);
  EXPECT_TRUE(n.losses_bitwise_equal);
  EXPECT_FALSE(n.params_bitwise_equal);
  EXPECT_EQ(n.max_rel_diff, 0.0);
  // Said as what differs, not as a "largest relative difference 0".
  EXPECT_EQ(describe_numerics(n),
            "4 losses, the final parameters' L2 norm and max |x| equal; the parameters' sha256 differs (aa vs bb)");
}

TEST(Numerics, TheToleranceIsTheCallers) {
  std::vector<double> next = kLosses;
  next[2] = ulps_above(next[2], 8);  // 9.5e-7 relative
  EXPECT_EQ(compare_fingerprints(print(kLosses), print(next), 1e-6).status, NumericsStatus::kDrifted);
  EXPECT_EQ(compare_fingerprints(print(kLosses), print(next), 1e-7).status, NumericsStatus::kDiverged);
}

TEST(Numerics, FloatRoundingIsCountedInTheLossPrecision) {
  // float64 losses (not float32 numbers): 4 float64 ulps are rounding, 8 are not.
  const double x = 1.0 + DBL_EPSILON * 3;  // not a float32 number
  NumericsChange within = compare_fingerprints(print({x}), print({x + 4 * DBL_EPSILON}), kNumericsTolerance);
  EXPECT_FALSE(within.first_beyond_rounding.has_value());
  NumericsChange beyond = compare_fingerprints(print({x}), print({x + 8 * DBL_EPSILON}), kNumericsTolerance);
  EXPECT_TRUE(beyond.first_beyond_rounding.has_value());
}

TEST(Numerics, ANanOnOneSideDivergesThereAndSurvivesTheHexText) {
  std::vector<double> next = kLosses;
  next[2] = std::nan("");
  NumericsChange n = compare_fingerprints(print(kLosses), print(next), kNumericsTolerance);
  EXPECT_EQ(n.status, NumericsStatus::kDiverged);
  EXPECT_EQ(*n.first_beyond_tolerance, 2u);
  EXPECT_TRUE(std::isnan(n.diverged_next));
  // NaN on both sides, same bits: identical.
  EXPECT_EQ(compare_fingerprints(print(next), print(next), kNumericsTolerance).status, NumericsStatus::kIdentical);
}

TEST(Numerics, AnotherNumberOfStepsOrABadFingerprintIsIncomparable) {
  NumericsChange steps = compare_fingerprints(print(kLosses), print({1.5, 1.25}), kNumericsTolerance);
  EXPECT_EQ(steps.status, NumericsStatus::kIncomparable);
  EXPECT_NE(steps.detail.find("4 steps and 100 parameters in base, 2 steps"), std::string::npos) << steps.detail;
  json bad = print(kLosses);
  bad["loss_hex"][1] = "one";
  NumericsChange malformed = compare_fingerprints(print(kLosses), bad, kNumericsTolerance);
  EXPECT_EQ(malformed.status, NumericsStatus::kIncomparable);
  EXPECT_NE(malformed.detail.find("in new"), std::string::npos) << malformed.detail;
  json other = print(kLosses);
  other["format"] = "torchconform.fingerprint/2";
  EXPECT_EQ(compare_fingerprints(other, print(kLosses), kNumericsTolerance).status, NumericsStatus::kIncomparable);
  EXPECT_EQ(compare_fingerprints(json("x"), print(kLosses), kNumericsTolerance).status, NumericsStatus::kIncomparable);
}

Cell cell(const std::string& check, const std::string& recipe, const json& fingerprint, Role role = Role::kReference) {
  Cell c;
  c.check = check;
  c.recipe = recipe;
  c.device = "cpu";
  c.role = role;
  c.verdict = Verdict::kOk;
  if (!fingerprint.is_null()) c.metrics["fingerprint"] = fingerprint;
  return c;
}

TEST(Numerics, CellsWithoutAFingerprintOnOneSideAreNotRecordedOrMissing) {
  const std::vector<Cell> base{cell("reproducibility", "reference", print(kLosses)),
                               cell("eval_mode", "reference", json()),  // an older report: no fingerprint
                               cell("step_hygiene", "reference", print(kLosses)),
                               cell("init", "reference", json())};  // a check that does not train
  const std::vector<Cell> next{cell("reproducibility", "reference", print(kLosses)),
                               cell("eval_mode", "reference", print(kLosses)),
                               cell("resume_equality", "reference", print(kLosses)),
                               cell("init", "reference", json())};
  const std::vector<NumericsChange> n = diff_numerics(base, next, kNumericsTolerance);
  ASSERT_EQ(n.size(), 4u);  // init: no fingerprint on either side, not listed
  EXPECT_EQ(n[0].check, "reproducibility");
  EXPECT_EQ(n[0].status, NumericsStatus::kIdentical);
  EXPECT_EQ(n[1].check, "eval_mode");
  EXPECT_EQ(n[1].status, NumericsStatus::kNotRecorded);
  EXPECT_EQ(n[1].absent_from, "base");
  EXPECT_EQ(n[2].check, "resume_equality");
  EXPECT_EQ(n[2].status, NumericsStatus::kMissing);
  EXPECT_EQ(n[2].absent_from, "base");
  EXPECT_EQ(n[3].check, "step_hygiene");
  EXPECT_EQ(n[3].status, NumericsStatus::kMissing);
  EXPECT_EQ(n[3].absent_from, "new");
  for (const NumericsChange& c : n) {
    for (NumericsGate g : {NumericsGate::kOff, NumericsGate::kTolerant, NumericsGate::kStrict}) {
      if (c.status != NumericsStatus::kIdentical) {
        EXPECT_FALSE(numerics_fails(c, g)) << c.check;
      }
    }
  }
}

// Two reports: one identical cell, one drifted, one diverged, and a broken variant that diverged.
Comparison compare_with(NumericsGate gate) {
  std::vector<double> drift = kLosses, far = kLosses;
  drift[2] = ulps_above(drift[2], 8);
  far[1] = 1.25 * 1.05;
  const std::vector<Cell> base{cell("reproducibility", "reference", print(kLosses)),
                               cell("resume_equality", "reference", print(kLosses)),
                               cell("eval_mode", "reference", print(kLosses)),
                               cell("reproducibility", "no_seed", print(kLosses), Role::kVariant)};
  const std::vector<Cell> next{cell("reproducibility", "reference", print(kLosses)),
                               cell("resume_equality", "reference", print(drift, "bb")),
                               cell("eval_mode", "reference", print(far, "cc")),
                               cell("reproducibility", "no_seed", print(far, "dd"), Role::kVariant)};
  Report a, b;
  a.cells = base;
  b.cells = next;
  CompareOptions o;
  o.numerics = gate;
  return compare_reports(a, b, o);
}

TEST(Numerics, OffReportsWithoutGatingTolerantFailsADivergenceStrictFailsAnyDifference) {
  const Comparison off = compare_with(NumericsGate::kOff);
  ASSERT_EQ(off.numerics.size(), 4u);
  EXPECT_EQ(off.numerics[1].status, NumericsStatus::kDrifted);
  EXPECT_EQ(off.numerics[2].status, NumericsStatus::kDiverged);
  EXPECT_EQ(off.numerics[3].status, NumericsStatus::kDiverged);
  EXPECT_TRUE(off.numerics[3].variant);
  EXPECT_EQ(off.numerics_failures(), 0);
  EXPECT_EQ(exit_code_for(off), 0);

  const Comparison tolerant = compare_with(NumericsGate::kTolerant);
  EXPECT_EQ(tolerant.numerics_failures(), 1);  // eval_mode; the variant never gates
  EXPECT_EQ(exit_code_for(tolerant), 1);

  const Comparison strict = compare_with(NumericsGate::kStrict);
  EXPECT_EQ(strict.numerics_failures(), 2);  // resume_equality drifted too
  EXPECT_EQ(exit_code_for(strict), 1);
}

TEST(Numerics, TextNamesEachCellsClassAndTheGate) {
  const std::string off = render_compare_text(compare_with(NumericsGate::kOff));
  EXPECT_NE(off.find("numerics: 4 cell(s) with a training fingerprint: 1 identical, 1 drifted, 2 diverged"),
            std::string::npos) << off;
  EXPECT_NE(off.find("diverged     eval_mode / reference / cpu: step 1 beyond 0.09766%: loss 1.25 vs 1.3125"),
            std::string::npos) << off;
  EXPECT_NE(off.find("drifted      resume_equality / reference / cpu: largest relative difference 9.537e-07 (step 2)"),
            std::string::npos) << off;
  EXPECT_NE(off.find("[broken variant: not gating]"), std::string::npos) << off;
  EXPECT_NE(off.find("gate: PASS (0 benchmarks regressed, 0 verdicts worse)"), std::string::npos) << off;
  const std::string tolerant = render_compare_text(compare_with(NumericsGate::kTolerant));
  EXPECT_NE(tolerant.find("DIVERGED     eval_mode"), std::string::npos) << tolerant;
  EXPECT_NE(tolerant.find("gate: FAIL (0 benchmarks regressed, 0 verdicts worse, 1 numerics failure under "
                          "--numerics tolerant)"),
            std::string::npos) << tolerant;
}

TEST(Numerics, ParsesTheGate) {
  EXPECT_EQ(numerics_gate_from_string("off"), NumericsGate::kOff);
  EXPECT_EQ(numerics_gate_from_string("tolerant"), NumericsGate::kTolerant);
  EXPECT_EQ(numerics_gate_from_string("strict"), NumericsGate::kStrict);
  EXPECT_THROW(numerics_gate_from_string("loose"), std::invalid_argument);
}

}  // namespace
}  // namespace tc
