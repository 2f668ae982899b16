// The turn-taking channel of `ab --pairing repetition` (harness/ab/turns.h), both ends in this
// process: a side without a turn does not run, turns alternate in the order given, "stop" skips
// what is left, and a side whose `ab` is gone is told so instead of waiting for ever. (The two real
// builds taking turns: cli.ab_* tests.) And the filter that starts one benchmark in each build.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "harness/ab/ab_launch.h"
#include "harness/ab/turns.h"
#include "harness/cli.h"
#include "harness/contract/bench_registry.h"
#include "harness/contract/scratch.h"
#include "harness/report_json.h"

namespace tc {
namespace {

using namespace std::chrono_literals;

// A side: takes turns until stopped or gone, appending its label to `log` in each turn.
struct FakeSide {
  FakeSide(const std::string& dir, char label, std::string& log, std::atomic<int>& turns_taken)
      : thread([&, dir, label] {
          TurnTaker t(dir);
          for (;;) {
            const TurnTaker::Turn turn = t.wait();
            if (turn != TurnTaker::Turn::kGo) {
              last = turn;
              return;
            }
            log += label;  // only one side runs at a time: the turns serialise the writes
            ++turns_taken;
            t.done();
          }
        }) {}
  ~FakeSide() {
    if (thread.joinable()) thread.join();
  }
  std::atomic<TurnTaker::Turn> last{TurnTaker::Turn::kGo};
  std::thread thread;
};

const auto kAlive = [] { return true; };

TEST(AbTurns, SidesRunOnlyInTheirTurnsAndInTheOrderGiven) {
  Scratch scratch("tc-ab-turns-test-");
  const std::string da = scratch.file("a"), db = scratch.file("b");
  ASSERT_EQ(std::system(("mkdir " + da + " " + db).c_str()), 0);
  std::string log;
  std::atomic<int> a_turns{0}, b_turns{0};
  {
    TurnGiver ga(da), gb(db);
    FakeSide a(da, 'A', log, a_turns), b(db, 'B', log, b_turns);
    // A alone for three turns: B, given none, has not run.
    for (int i = 0; i < 3; ++i) ga.give_turn(kAlive, 10s, "A");
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(a_turns.load(), 3);
    EXPECT_EQ(b_turns.load(), 0);
    // Then pairs in a drawn order.
    for (const bool a_first : {true, false, false, true}) {
      (a_first ? ga : gb).give_turn(kAlive, 10s, "first");
      (a_first ? gb : ga).give_turn(kAlive, 10s, "second");
    }
    ga.stop();
    gb.stop();
    a.thread.join();
    b.thread.join();
    EXPECT_EQ(a.last.load(), TurnTaker::Turn::kStop);
    EXPECT_EQ(b.last.load(), TurnTaker::Turn::kStop);
  }
  EXPECT_EQ(log, "AAA" "AB" "BA" "BA" "AB");
}

TEST(AbTurns, ASideWhoseAbIsGoneIsToldSo) {
  Scratch scratch("tc-ab-turns-test-");
  std::string log;
  std::atomic<int> turns{0};
  auto giver = std::make_unique<TurnGiver>(scratch.path());
  FakeSide a(scratch.path(), 'A', log, turns);
  giver->give_turn(kAlive, 10s, "A");
  giver.reset();  // ab ends: the side's next wait sees the end of the pipe
  a.thread.join();
  EXPECT_EQ(a.last.load(), TurnTaker::Turn::kGone);
  EXPECT_EQ(turns.load(), 1);
}

TEST(AbTurns, ATurnOfASideThatEndedOrHangsFailsWithItsName) {
  Scratch scratch("tc-ab-turns-test-");
  TurnGiver g(scratch.path());  // nobody takes the turns
  try {
    g.give_turn([] { return false; }, 10s, "NEW 'build-b' bench of x");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("NEW 'build-b' bench of x ended during its turn"), std::string::npos) << e.what();
  }
  try {
    g.give_turn(kAlive, 200ms, "BASE");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("BASE did not finish its turn"), std::string::npos) << e.what();
  }
}

TEST(AbTurns, TakingTurnsWithoutAbIsAClearError) {
  Scratch scratch("tc-ab-turns-test-");
  try {
    TurnTaker t(scratch.file("none"));
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open its pipes"), std::string::npos) << e.what();
  }
}

int bench_main(std::vector<std::string> args) {
  args.insert(args.begin(), {"torchconform", "bench"});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return cli_main(static_cast<int>(args.size()), argv.data());
}

// `bench --ab-turns DIR --iterations N` in this process: each repetition runs exactly N iterations,
// only when given its turn.
TEST(AbTurns, BenchRunsEachRepetitionInItsTurnWithTheFixedIterations) {
  Scratch scratch("tc-ab-turns-test-");
  std::atomic<int> invocations{0};
  std::vector<long long> iterations;
  tc::bench::add("unit/turn_bench", "cpu", [&](benchmark::State& s) {
    ++invocations;
    long long n = 0;
    for (auto _ : s) ++n;
    iterations.push_back(n);
  });
  TurnGiver g(scratch.path());
  int rc = -1;
  std::thread bench([&] {
    rc = bench_main({"--json", scratch.file("r.json"), "--ab-turns", scratch.path(), "--iterations", "7",
                     "--benchmark_filter=^unit/turn_bench", "--benchmark_repetitions=4"});
  });
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(invocations.load(), 0);  // no turn given yet
  for (int i = 0; i < 4; ++i) {
    g.give_turn(kAlive, 30s, "bench");
    EXPECT_EQ(invocations.load(), i + 1);
  }
  bench.join();
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(iterations, (std::vector<long long>{7, 7, 7, 7}));
  const Report rep = read_report_file(scratch.file("r.json"));
  ASSERT_EQ(rep.benchmarks.size(), 1u);
  EXPECT_EQ(rep.benchmarks[0].name, "unit/turn_bench");
  EXPECT_EQ(rep.benchmarks[0].samples.size(), 4u);
}

// A benchmark registered with Google Benchmark directly cannot take turns: a clear error (ab then
// shows it with the side's output), not a run that ignored the turns.
TEST(AbTurns, ABenchmarkThatCannotTakeTurnsIsAClearError) {
  Scratch scratch("tc-ab-turns-test-");
  benchmark::RegisterBenchmark("unit_direct_bench", [](benchmark::State& s) {
    for (auto _ : s) {
    }
  });
  TurnGiver g(scratch.path());
  testing::internal::CaptureStderr();
  const int rc = bench_main({"--json", scratch.file("r.json"), "--ab-turns", scratch.path(), "--iterations", "3",
                             "--benchmark_filter=^unit_direct_bench$", "--benchmark_repetitions=2"});
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 2);
  EXPECT_NE(err.find("did not take turns (registered without tc::bench::add)"), std::string::npos) << err;
}

// The filter that starts one benchmark in each build: that benchmark and no other, with or
// without the "iterations:N" that --iterations adds (Google Benchmark's filter is an extended regex).
TEST(AbTurns, TheFilterMatchesExactlyTheBenchmarkWithOrWithoutItsIterationCount) {
  auto matches = [](const std::string& run_name, const std::string& name) {
    return std::regex_search(name, std::regex(exact_filter(run_name), std::regex::extended));
  };
  const std::string step = "reference/train_step/device:cpu";
  EXPECT_TRUE(matches(step, step));
  EXPECT_TRUE(matches(step, step + "/iterations:69"));
  EXPECT_FALSE(matches(step, step + "2"));
  EXPECT_FALSE(matches(step, "x" + step));
  EXPECT_FALSE(matches("a.b", "axb"));  // a dot is a dot
  const std::string h2d = "amp/h2d/device:cpu/4096/real_time";
  EXPECT_TRUE(matches(h2d, h2d));
  EXPECT_TRUE(matches(h2d, "amp/h2d/device:cpu/4096/iterations:5/real_time"));
  EXPECT_FALSE(matches(h2d, "amp/h2d/device:cpu/40960/real_time"));
  EXPECT_FALSE(matches(h2d, "amp/h2d/device:cpu/4096"));
  // A benchmark with its own iteration count: the count may change.
  EXPECT_TRUE(matches("allreduce/gloo/bytes:4/iterations:100/manual_time",
                      "allreduce/gloo/bytes:4/iterations:7/manual_time"));
}

}  // namespace
}  // namespace tc
