// The pieces of `bench --measure instructions` that need no valgrind: the callgrind command line,
// the counted child's environment, reading a dump's total, the environment block. The counting
// itself runs under valgrind, about a minute: measured by hand and by ci/ab-instruction-trials
// (docs/benchmarks-and-gating.md), not in a unit test.
#include <algorithm>
#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

#include "harness/contract/scratch.h"
#include "harness/instructions.h"

namespace tc {
namespace {

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(Instructions, TheChildRunsUnderCallgrindCountingTheTimedLoopOfItsOwnThread) {
  const std::vector<std::string> argv =
      instructions::wrap_argv("/usr/bin/valgrind", "/tmp/d", {"/bin/torchconform", "bench", "--measure", "instructions"});
  ASSERT_GE(argv.size(), 5u);
  EXPECT_EQ(argv.front(), "/usr/bin/valgrind");
  EXPECT_TRUE(has(argv, "--tool=callgrind"));
  EXPECT_TRUE(has(argv, "--instr-atstart=no"));  // LibTorch's start-up is not instrumented
  EXPECT_TRUE(has(argv, "--zero-before=benchmark::State::StartKeepRunning*"));
  EXPECT_TRUE(has(argv, "--dump-before=benchmark::State::FinishKeepRunning*"));
  EXPECT_TRUE(has(argv, "--separate-threads=yes"));
  EXPECT_TRUE(has(argv, "--smc-check=all-non-file"));  // oneDNN's JIT code
  EXPECT_TRUE(has(argv, "--callgrind-out-file=/tmp/d/callgrind.out.%p"));
  // The program and its arguments last, unchanged.
  EXPECT_EQ(argv[argv.size() - 4], "/bin/torchconform");
  EXPECT_EQ(argv.back(), "instructions");
}

TEST(Instructions, TheChildIsSingleThreadedAndKnowsItsDumpDirectory) {
  const auto env = instructions::child_env("/tmp/d");
  auto value = [&](const std::string& k) {
    for (const auto& [key, v] : env) {
      if (key == k) return v;
    }
    return std::string("<unset>");
  };
  EXPECT_EQ(value(instructions::kDumpDirVar), "/tmp/d");
  EXPECT_EQ(value("OMP_NUM_THREADS"), "1");
  EXPECT_EQ(value("TORCHCONFORM_THREADS"), "1");
}

TEST(Instructions, ADumpsTotalIsItsSummaryLine) {
  Scratch scratch("torchconform-instructions-test-");
  const std::string dump = scratch.file("callgrind.out.1.1-01");
  std::ofstream(dump) << "# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\npid: 1\ncmd: x\npart: 1\n\n"
                         "events: Ir\nsummary: 9047200\n\nfn=(1) main\n0 12\ntotals: 9047201\n";
  const auto total = instructions::read_dump_total(dump);
  ASSERT_TRUE(total.has_value());
  EXPECT_DOUBLE_EQ(*total, 9047200.0);
  const std::string empty = scratch.file("empty");
  std::ofstream(empty) << "events: Ir\n";
  EXPECT_FALSE(instructions::read_dump_total(empty).has_value());
  EXPECT_FALSE(instructions::read_dump_total(scratch.file("absent")).has_value());
}

TEST(Instructions, TheEnvironmentBlockSaysHowTheyWereCounted) {
  const nlohmann::json e = instructions::environment_block("/nonexistent/valgrind", 2, 6);
  EXPECT_EQ(e.at("iterations"), 2);
  EXPECT_EQ(e.at("repetitions"), 6);
  EXPECT_EQ(e.at("program"), "/nonexistent/valgrind");
  EXPECT_EQ(e.at("version"), "");  // cannot be run: said as empty, not guessed
  ASSERT_TRUE(e.at("options").is_array());
  bool names_scratch = false;
  for (const auto& o : e.at("options")) names_scratch = names_scratch || o.get<std::string>().find("<scratch>") != std::string::npos;
  EXPECT_TRUE(names_scratch);  // no temporary path in a report
}

TEST(Instructions, ACounterOutsideACountedChildIsRefusedWithASentence) {
  if (!instructions::supported()) GTEST_SKIP() << "built without valgrind/callgrind.h";
  unsetenv(instructions::kDumpDirVar);
  EXPECT_THROW(instructions::Counter c, std::runtime_error);
}

}  // namespace
}  // namespace tc
