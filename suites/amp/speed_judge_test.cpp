// The amp speed bars on recorded figures of machines (suites/amp/fixtures/): every branch of the
// judge (a gain judged and held or broken, no gain recorded, an undecided ceiling or procedure) runs
// on every CI, whatever CPU it has. The fixtures say where their figures come from (a real run's
// rounds, or issue 38's step times and public figures, marked as estimates).
#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "suites/amp/speed_judge.h"
#include "suites/amp/throughput.h"
#include "harness/testing/test_paths.h"

namespace tc::amp {
namespace {

const std::string kFixtures = std::string(tc::test_paths::source_dir()) + "/suites/amp/fixtures";

std::vector<std::string> fixture_files() {
  std::vector<std::string> out;
  if (DIR* d = opendir(kFixtures.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() > 5 && n.compare(n.size() - 5, 5, ".json") == 0) out.push_back(n);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

nlohmann::json read(const std::string& name) {
  std::ifstream in(kFixtures + "/" + name);
  return nlohmann::json::parse(in);
}

std::string throughput_said(const SpeedVerdict& v) {
  return v.throughput_judged() ? stats::to_string(v.throughput_v) : "not judged";
}

// The CPUs of issue 38 (AVX2 only, avx512_bf16 without AMX, AMX) and a CUDA GPU, each a branch
// the developer's machine may lack.
TEST(AmpSpeedBars, EveryMachineKindIsCovered) {
  const std::vector<std::string> files = fixture_files();
  for (const char* want : {"avx2_only_epyc.json", "avx512_bf16_epyc.json", "amx_xeon.json", "h200_cuda.json"}) {
    EXPECT_NE(std::find(files.begin(), files.end(), want), files.end()) << want << " missing in " << kFixtures;
  }
}

TEST(AmpSpeedBars, EachRecordedMachineIsJudgedAsItsFixtureSays) {
  std::set<std::string> branches;
  for (const std::string& file : fixture_files()) {
    const nlohmann::json fx = read(file);
    for (const auto& [name, c] : fx["cases"].items()) {
      const SpeedVerdict v = judge_speed(speed_rounds_from_json(c["rounds"]));
      const std::string where = file + " / " + name + ": attainable " + describe(v.attainable) + ", speed-up " +
                                describe(v.speedup) + ", bar " + describe(v.bar) + ", procedure " +
                                describe(v.procedure);
      EXPECT_EQ(to_string(v.ceiling_says), c["expect"]["ceiling"].get<std::string>()) << where;
      EXPECT_EQ(to_string(v.reference_says), c["expect"].value("reference", "gain")) << where;
      EXPECT_EQ(stats::to_string(v.procedure_v), c["expect"]["procedure"].get<std::string>()) << where;
      EXPECT_EQ(throughput_said(v), c["expect"]["throughput"].get<std::string>()) << where;
      branches.insert(std::string("ceiling ") + to_string(v.ceiling_says));
      branches.insert(std::string("reference ") + to_string(v.reference_says));
      branches.insert(std::string("procedure ") + stats::to_string(v.procedure_v));
      branches.insert("throughput " + throughput_said(v));
    }
  }
  // Every branch of both promises is exercised by some fixture.
  for (const char* b : {"ceiling gain", "ceiling no gain", "ceiling undecided", "reference gain", "reference no gain",
                        "reference undecided", "procedure pass", "procedure fail",
                        "procedure undecided", "throughput pass", "throughput fail", "throughput not judged"}) {
    EXPECT_TRUE(branches.count(b)) << "no fixture reaches '" << b << "'";
  }
}

// Eight rounds of the six times, each 0.1% apart (an interval that decides in 8 rounds).
SpeedRounds rounds_of(double ref_fp32, double ref_amp, double recipe_fp32, double recipe_amp, double gemm_fp32,
                      double gemm_amp) {
  SpeedRounds r;
  for (int i = 0; i < 8; ++i) {
    const double j = 1 + 0.001 * i;
    r.ref_fp32.push_back(ref_fp32 * j), r.ref_amp.push_back(ref_amp * j), r.recipe_fp32.push_back(recipe_fp32 * j);
    r.recipe_amp.push_back(recipe_amp * j), r.gemm_fp32.push_back(gemm_fp32 * j), r.gemm_amp.push_back(gemm_amp * j);
  }
  return r;
}

// Where correct mixed precision takes most of the matmuls' saving (the reference saves half the
// step here), the bar follows the ceiling: the same step speed-up holds where the machine's matmuls
// gain a little and breaks where they would have saved much more.
TEST(AmpSpeedBars, TheBarRisesWithWhatTheMachinesMatmulsWouldSave) {
  SpeedRounds r = rounds_of(0.05, 0.025, 0.05, 0.048, 0.04, 0.02);
  const SpeedVerdict modest = judge_speed(r);  // c = 2, p = 0.8: bar 1/(1 - 0.25 * 0.8 * 0.5) = 1.11
  EXPECT_EQ(modest.ceiling_says, Ceiling::kGain);
  EXPECT_EQ(modest.reference_says, Ceiling::kGain);
  EXPECT_NEAR(modest.bar.median, 1.0 / (1.0 - kGainShare * 0.8 * 0.5), 1e-9);
  EXPECT_EQ(modest.throughput_v, stats::BarVerdict::kFail);  // 1.04x
  for (double& t : r.recipe_amp) t *= 0.9;                    // 1.157x
  EXPECT_EQ(judge_speed(r).throughput_v, stats::BarVerdict::kPass);
  for (double& t : r.gemm_amp) t /= 10;                        // c = 20: bar 1/(1 - 0.25 * 0.8 * 0.95) = 1.23
  EXPECT_EQ(judge_speed(r).throughput_v, stats::BarVerdict::kFail);
}

// Where correct mixed precision saves less than a quarter of what the matmuls would (casts and
// fp32 ops cost more beside fast matmuls: the Xeon with AMX of amx_xeon.json), the bar is half of
// what the reference's procedure saves: a recipe that takes most of that holds, one that casts
// nothing (its AMP step its fp32 step) is still caught, and the recipe's optimizer, in both of its
// steps, does not move the bar.
TEST(AmpSpeedBars, TheBarNeverAsksMoreThanHalfOfWhatCorrectMixedPrecisionSaves) {
  // The matmuls 60% of the step, 2.5x faster: they would save 36%, a quarter of it 9% (bar 1.099);
  // the reference saves 10% (1.11x), half of it 5%: bar 1/(1 - 0.05) = 1.053.
  SpeedRounds r = rounds_of(0.05, 0.045, 0.05, 0.0455, 0.03, 0.012);
  SpeedVerdict v = judge_speed(r);
  EXPECT_NEAR(v.bar.median, 1.0 / (1.0 - kReferenceShare * 0.1), 1e-9);
  EXPECT_EQ(v.throughput_v, stats::BarVerdict::kPass);  // 1.099x: under a quarter of the matmuls' saving
  for (size_t i = 0; i < r.size(); ++i) r.recipe_amp[i] = r.recipe_fp32[i];
  EXPECT_EQ(judge_speed(r).throughput_v, stats::BarVerdict::kFail);  // nothing cast: 1.0x
  // An AdamW recipe: 10 ms more in both of its steps; the same 4.5 ms saved is the same bar in time.
  r = rounds_of(0.05, 0.045, 0.06, 0.0555, 0.03, 0.012);
  v = judge_speed(r);
  EXPECT_NEAR(v.bar.median, 1.0 / (1.0 - kReferenceShare * 0.005 / 0.06), 1e-9);
  EXPECT_EQ(v.throughput_v, stats::BarVerdict::kPass);
}

// Where the reference's own AMP step is no faster than its fp32 step, no recipe is asked for a
// gain: throughput is recorded, whatever the matmuls attain.
TEST(AmpSpeedBars, NoGainIsAskedWhereCorrectMixedPrecisionTakesNone) {
  const SpeedVerdict v = judge_speed(rounds_of(0.05, 0.052, 0.05, 0.06, 0.03, 0.012));
  EXPECT_EQ(v.ceiling_says, Ceiling::kGain);
  EXPECT_EQ(v.reference_says, Ceiling::kNoGain);
  EXPECT_FALSE(v.throughput_judged());
  EXPECT_EQ(v.throughput_v, stats::BarVerdict::kUndecided);
  EXPECT_EQ(v.procedure_v, stats::BarVerdict::kPass);  // 0.833x / 0.962x = 0.87 of the reference's
  EXPECT_TRUE(v.decided());
}

TEST(AmpSpeedBars, MalformedRoundsAreRefusedByName) {
  nlohmann::json j = to_json(SpeedRounds{{1}, {1}, {1}, {1}, {1}, {1}});
  EXPECT_NO_THROW(speed_rounds_from_json(j));
  nlohmann::json uneven = j;
  uneven["gemm_amp_s"] = {1, 2};
  EXPECT_THROW(
      try { speed_rounds_from_json(uneven); } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("'gemm_amp_s' has 2 rounds"), std::string::npos) << e.what();
        throw;
      },
      std::runtime_error);
  nlohmann::json negative = j;
  negative["ref_amp_s"] = {-1};
  EXPECT_THROW(speed_rounds_from_json(negative), std::runtime_error);
  nlohmann::json missing = j;
  missing.erase("recipe_fp32_s");
  EXPECT_THROW(speed_rounds_from_json(missing), std::runtime_error);
}

// The CPU workload is fitted to the machine where its narrower dtype's matmuls are slow (the timing
// rounds would spend most of their time there), and left as it is elsewhere. Recorded figures: one
// step of the 4x64 block's matmuls in bf16 (the fixtures' gemm_amp_s medians, and this project's
// AVX2-only EPYC of 2026-12-06, `run --check amp --recipe reference`: 0.452 s).
TEST(AmpSpeedBars, TheCpuWorkloadIsCutOnlyWhereTheDtypesMatmulsAreSlow) {
  EXPECT_EQ(fitted_seq(64, 0.0045), 64);  // amx_xeon.json
  EXPECT_EQ(fitted_seq(64, 0.0083), 64);  // avx512_bf16_epyc.json
  EXPECT_EQ(fitted_seq(64, 0.0658), 64);  // avx2_only_epyc.json: slower than fp32, under the target
  EXPECT_EQ(fitted_seq(64, kDtypeStepTarget), 64);
  EXPECT_EQ(fitted_seq(64, 0.452), 16);  // 0.113 s at 16 tokens
  EXPECT_EQ(fitted_seq(64, 0.25), 16);   // 0.125 s at 32 is over the target
  EXPECT_EQ(fitted_seq(64, 0.24), 32);
  EXPECT_EQ(fitted_seq(64, 60.0), kMinFittedSeq);  // never below 8 tokens, however slow
}

}  // namespace
}  // namespace tc::amp
