// The assessment of `torchconform qualify`: robust leave-one-out bounds and fingerprint majority.
#include <gtest/gtest.h>

#include "harness/qualify/qualify.h"
#include "harness/qualify/assess.h"
#include "harness/tests/approval.h"

namespace tc::qualify {
namespace {

RankResult rank(int i, double matmul, const std::string& params = "aa", double copy = 10.0) {
  RankResult r;
  r.rank = i;
  r.host = "host";
  r.device = "cpu";
  r.device_id = "cores 0-1 of 2";
  r.figures.push_back({"matmul", "TFLOP/s", {matmul}, matmul, "fp32"});
  r.figures.push_back({"copy", "GB/s", {copy}, copy, "64 MiB"});
  r.fingerprint.record = {{"format", "torchconform.fingerprint/1"}, {"loss_hex", {"0x1p+0"}},
                          {"params", {{"sha256", params}}}};
  return r;
}

TEST(QualifyAssess, MadIsTheMedianAbsoluteDeviation) {
  EXPECT_DOUBLE_EQ(mad({1.0, 2.0, 3.0, 4.0, 100.0}), 1.0);  // deviations 2 1 0 1 97
  EXPECT_DOUBLE_EQ(mad({5.0}), 0.0);
  EXPECT_TRUE(std::isnan(mad({})));
}

TEST(QualifyAssess, BoundIsKScaledMadOrTheFloorWhicheverIsLarger) {
  const Bounds b{5.0, 0.10};
  // Others 10, 11, 12 (centre 11, MAD 1): 5 x 1.4826 x 1 = 7.413 > 10% of 11.
  Deviation d = deviation({3.0, 10.0, 11.0, 12.0}, 0, b);
  EXPECT_DOUBLE_EQ(d.centre, 11.0);
  EXPECT_DOUBLE_EQ(d.mad, 1.0);
  EXPECT_DOUBLE_EQ(d.bound, 5.0 * 1.4826);
  EXPECT_TRUE(d.flagged);  // 3 < 11 - 7.413
  EXPECT_FALSE(deviation({4.0, 10.0, 11.0, 12.0}, 0, b).flagged);  // 4 > 3.587
  // Others agree exactly (MAD 0): the floor, 10% of 100.
  d = deviation({89.0, 100.0, 100.0, 100.0}, 0, b);
  EXPECT_DOUBLE_EQ(d.bound, 10.0);
  EXPECT_TRUE(d.flagged);
  EXPECT_FALSE(deviation({91.0, 100.0, 100.0, 100.0}, 0, b).flagged);
}

TEST(QualifyAssess, OnlyTheSlowSideIsFlaggedSoAPairNamesItsSlowDevice) {
  const Bounds b{5.0, 0.15};
  const Assessment j = assess({rank(0, 1.0), rank(1, 0.5)}, b);
  ASSERT_EQ(j.flags.size(), 1u);
  EXPECT_EQ(j.flags[0].rank, 1);
  EXPECT_NE(j.flags[0].what.find("matmul 0.5 TFLOP/s is 50.0% below the others' median 1"), std::string::npos)
      << j.flags[0].what;
  EXPECT_FALSE(j.figures[0].per_rank[0].flagged);  // twice as fast as the other: not flagged
}

TEST(QualifyAssess, TheOutlierDoesNotPullTheReferenceTowardsItself) {
  // Leave-one-out: rank 3 at a third of the others is judged against 1.0, 1.02, 0.98.
  const Assessment j = assess({rank(0, 1.0), rank(1, 1.02), rank(2, 0.98), rank(3, 0.33)}, Bounds{});
  ASSERT_EQ(j.flags.size(), 1u);
  EXPECT_EQ(j.flags[0].rank, 3);
  EXPECT_DOUBLE_EQ(j.figures[0].per_rank[3].centre, 1.0);
}

TEST(QualifyAssess, NoiseWithinTheBoundFlagsNothing) {
  const Assessment j = assess({rank(0, 1.0), rank(1, 0.93), rank(2, 1.05), rank(3, 0.97)}, Bounds{});
  EXPECT_TRUE(j.flags.empty());
  EXPECT_EQ(j.fingerprint.majority_count, 4);
}

TEST(QualifyAssess, AFingerprintOffTheMajorityIsFlagged) {
  const Assessment j = assess({rank(0, 1.0), rank(1, 1.0, "bb"), rank(2, 1.0)}, Bounds{});
  ASSERT_EQ(j.flags.size(), 1u);
  EXPECT_EQ(j.flags[0].rank, 1);
  EXPECT_NE(j.flags[0].what.find("differs from the majority's (2 of 3 ranks)"), std::string::npos);
  EXPECT_EQ(j.fingerprint.differs, (std::vector<bool>{false, true, false}));
}

TEST(QualifyAssess, TwoDifferentFingerprintsHaveNoMajorityAndBothAreFlagged) {
  const Assessment j = assess({rank(0, 1.0), rank(1, 1.0, "bb")}, Bounds{});
  ASSERT_EQ(j.flags.size(), 2u);
  EXPECT_TRUE(j.fingerprint.majority_digest.empty());
  EXPECT_NE(j.flags[0].what.find("no majority"), std::string::npos);
}

TEST(QualifyAssess, LossBitsArePartOfTheFingerprint) {
  RankResult other = rank(1, 1.0);
  other.fingerprint.record["loss_hex"] = {"0x1.000002p+0"};
  EXPECT_EQ(assess({rank(0, 1.0), other, rank(2, 1.0)}, Bounds{}).flags.size(), 1u);
}

TEST(QualifyAssess, OneRankHasNothingToBeComparedWith) {
  const Assessment j = assess({rank(0, 1.0)}, Bounds{});
  EXPECT_TRUE(j.flags.empty());
  EXPECT_TRUE(j.figures.empty());
}

TEST(QualifyReport, RankResultsRoundTripThroughJson) {
  RankResult r = rank(2, 0.25, "cc");
  r.notes = {"slowed"};
  const RankResult back = rank_result_from_json(to_json(r));
  EXPECT_EQ(to_json(back), to_json(r));
  nlohmann::json bad = to_json(r);
  bad.erase("host");
  EXPECT_THROW(rank_result_from_json(bad), std::invalid_argument);
}

TEST(QualifyReport, TextJsonAndHtmlNameTheFlaggedRank) {
  Report rep;
  rep.ranks = {rank(0, 1.0), rank(1, 0.4)};
  rep.assessment = assess(rep.ranks, rep.bounds);
  EXPECT_EQ(rep.exit_code(), 1);
  const std::string text = render_text(rep);
  EXPECT_NE(text.find("FLAGGED rank 1 (host, cpu, cores 0-1 of 2): matmul 0.4 TFLOP/s is 60.0% below"), std::string::npos)
      << text;
  const nlohmann::json j = report_json(rep);
  EXPECT_EQ(j["schema"], "torchconform.qualify/2");
  EXPECT_EQ(j["flags"][0]["rank"], 1);
  EXPECT_EQ(j["summary"]["exit_code"], 1);
  EXPECT_EQ(j["figures"][0]["per_rank"][1]["flagged"], true);
  const std::string html = render_html(rep);
  EXPECT_NE(html.find("<tr data-rank=\"1\" data-flagged=\"true\">"), std::string::npos);
  EXPECT_NE(html.find("<tr data-rank=\"0\" data-flagged=\"false\">"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);  // self-contained, no scripts
}

// qualify's three outputs for fixed ranks (one slow, one with another fingerprint): any difference
// from the approved files (harness/tests/approved/qualify.approved.*) is a change of the format.
TEST(Approval, QualifyTextJsonAndHtml) {
  Report r;
  r.header = {{"tool", {{"name", "torchconform"}, {"version", "0.0.0-approval"}, {"git_commit", nullptr}}},
              {"run", {{"started_at", "2026-01-01T00:00:00Z"}, {"argv", {"torchconform", "qualify"}}, {"seed", 0},
                       {"devices", {"cpu"}}}},
              {"environment", {{"host", "approval-host"}}}};
  r.ranks = {rank(0, 1.0), rank(1, 1.02), rank(2, 0.5), rank(3, 0.98, "bb")};
  r.bounds = Bounds{};
  r.assessment = assess(r.ranks, r.bounds);
  expect_approved("qualify.approved.txt", render_text(r));
  expect_approved("qualify.approved.json", report_json(r).dump(2) + "\n");
  expect_approved("qualify.approved.html", render_html(r));
}

}  // namespace
}  // namespace tc::qualify
