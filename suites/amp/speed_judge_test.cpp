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
  return v.ceiling_says == Ceiling::kGain ? stats::to_string(v.throughput_v) : "not judged";
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
      EXPECT_EQ(stats::to_string(v.procedure_v), c["expect"]["procedure"].get<std::string>()) << where;
      EXPECT_EQ(throughput_said(v), c["expect"]["throughput"].get<std::string>()) << where;
      branches.insert(std::string("ceiling ") + to_string(v.ceiling_says));
      branches.insert(std::string("procedure ") + stats::to_string(v.procedure_v));
      branches.insert("throughput " + throughput_said(v));
    }
  }
  // Every branch of both promises is exercised by some fixture.
  for (const char* b : {"ceiling gain", "ceiling no gain", "ceiling undecided", "procedure pass", "procedure fail",
                        "procedure undecided", "throughput pass", "throughput fail", "throughput not judged"}) {
    EXPECT_TRUE(branches.count(b)) << "no fixture reaches '" << b << "'";
  }
}

// The bar follows the ceiling: the same step speed-up holds where the machine's matmuls gain a
// little and breaks where they would have saved much more.
TEST(AmpSpeedBars, TheBarRisesWithWhatTheMachinesMatmulsWouldSave) {
  SpeedRounds r;
  for (int i = 0; i < 8; ++i) {
    const double j = 1 + 0.001 * i;
    r.ref_fp32.push_back(0.05 * j), r.ref_amp.push_back(0.045 * j), r.recipe_fp32.push_back(0.05 * j);
    r.recipe_amp.push_back(0.048 * j), r.gemm_fp32.push_back(0.04 * j), r.gemm_amp.push_back(0.02 * j);
  }
  const SpeedVerdict modest = judge_speed(r);  // c = 2, p = 0.8: bar 1/(1 - 0.25 * 0.8 * 0.5) = 1.11
  EXPECT_EQ(modest.ceiling_says, Ceiling::kGain);
  EXPECT_NEAR(modest.bar.median, 1.0 / (1.0 - kGainShare * 0.8 * 0.5), 1e-9);
  EXPECT_EQ(modest.throughput_v, stats::BarVerdict::kFail);  // 1.04x
  for (double& t : r.recipe_amp) t *= 0.9;                    // 1.157x
  EXPECT_EQ(judge_speed(r).throughput_v, stats::BarVerdict::kPass);
  for (double& t : r.gemm_amp) t /= 10;                        // c = 20: bar 1/(1 - 0.25 * 0.8 * 0.95) = 1.23
  EXPECT_EQ(judge_speed(r).throughput_v, stats::BarVerdict::kFail);
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

}  // namespace
}  // namespace tc::amp
