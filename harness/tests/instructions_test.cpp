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
  // A fixed simulated cache: the misses mean the same on every machine.
  EXPECT_TRUE(has(argv, "--cache-sim=yes"));
  EXPECT_TRUE(has(argv, "--D1=32768,8,64"));
  EXPECT_TRUE(has(argv, "--LL=8388608,16,64"));
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
  const auto events = instructions::read_dump_events(dump);
  ASSERT_EQ(events.count("Ir"), 1u);
  EXPECT_DOUBLE_EQ(events.at("Ir"), 9047200.0);
  const std::string empty = scratch.file("empty");
  std::ofstream(empty) << "events: Ir\n";
  EXPECT_EQ(instructions::read_dump_events(empty).count("Ir"), 0u);
  EXPECT_EQ(instructions::read_dump_events(scratch.file("absent")).count("Ir"), 0u);
}

TEST(Instructions, ACacheSimulatingDumpGivesCountsAndMissesPerIteration) {
  Scratch scratch("torchconform-instructions-test-");
  const std::string dump = scratch.file("callgrind.out.1.2-01");
  // As callgrind 3.19 writes it with --cache-sim=yes (a repetition of 2 iterations, seen here).
  std::ofstream(dump) << "version: 1\ncreator: callgrind-3.19.0\n\n"
                         "events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw\n"
                         "summary: 18091801 5299074 1793853 124100 204310 133839 131 118 12460\n\nfn=(1) main\n";
  const auto events = instructions::read_dump_events(dump);
  ASSERT_EQ(events.size(), 9u);
  EXPECT_DOUBLE_EQ(events.at("D1mr"), 204310.0);
  EXPECT_DOUBLE_EQ(events.at("Ir"), 18091801.0);
  const auto c = instructions::counters_per_iteration(events, 2);
  EXPECT_DOUBLE_EQ(c.at(instructions::kCounter), 18091801.0 / 2);
  EXPECT_DOUBLE_EQ(c.at(instructions::kL1Misses), (124100.0 + 204310.0 + 133839.0) / 2);
  EXPECT_DOUBLE_EQ(c.at(instructions::kLLMisses), (131.0 + 118.0 + 12460.0) / 2);
  // Without the cache events: the count alone; without Ir: nothing.
  EXPECT_EQ(instructions::counters_per_iteration({{"Ir", 10.0}}, 2).size(), 1u);
  EXPECT_TRUE(instructions::counters_per_iteration({{"D1mr", 10.0}}, 2).empty());
  EXPECT_TRUE(instructions::counters_per_iteration({{"Ir", 10.0}}, 0).empty());
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
  EXPECT_NE(e.at("cache").get<std::string>().find("not this CPU's"), std::string::npos);
}

TEST(Instructions, ACounterOutsideACountedChildIsRefusedWithASentence) {
  if (!instructions::supported()) {
    GTEST_SKIP() << "built without valgrind/callgrind.h";
  }
  unsetenv(instructions::kDumpDirVar);
  EXPECT_THROW(instructions::Counter c, std::runtime_error);
}

}  // namespace
}  // namespace tc
