// torchrun ranks forked from a template (harness/rank_server.h), through the real shim
// (torchconform-rank, built beside the binary) as torchrun starts it: what the rank gets from the
// shim, and what the shim tells of the rank. The ranks here run this test's own main.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "harness/child_process.h"
#include "harness/contract/scratch.h"
#include "harness/rank_server.h"
#include "harness/testing/test_paths.h"
#include "harness/util/posix_fs.h"

namespace tc {
namespace {

// The rank's program: `PROGRAM echo` prints what it was given and exits 3; `PROGRAM wait FILE`
// writes its pid to FILE and waits for a signal; `PROGRAM abort` ends by SIGABRT.
int rank_main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "echo") {
    char cwd[4096];
    std::printf("cwd=%s\n", getcwd(cwd, sizeof cwd) != nullptr ? cwd : "?");
    const char* x = std::getenv("TC_RANK_TEST_X");
    std::printf("X=%s\n", x != nullptr ? x : "(unset)");
    std::printf("inherited=%s\n", std::getenv("TC_RANK_TEST_TEMPLATE_ONLY") != nullptr ? "yes" : "no");
    std::printf("argv0=%s argc=%d\n", argv[0], argc);
    std::fprintf(stderr, "to stderr\n");
    return 3;
  }
  if (mode == "wait" && argc > 2) {
    std::ofstream(argv[2]) << getpid() << "\n";
    for (;;) pause();
  }
  if (mode == "abort") {
    signal(SIGABRT, SIG_DFL);
    abort();
  }
  return 64;
}

class RankServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Set only here: a rank gets the shim's environment, not the template's.
    setenv("TC_RANK_TEST_TEMPLATE_ONLY", "1", 1);
    why_not_started() = rank_server::start(rank_main, test_paths::torchconform_binary());
    unsetenv("TC_RANK_TEST_TEMPLATE_ONLY");
  }
  static std::string& why_not_started() {
    static std::string why;
    return why;
  }
  void SetUp() override {
    ASSERT_EQ(why_not_started(), "");
    prefix_ = rank_server::launcher_prefix("cpu", test_paths::torchconform_binary());
    ASSERT_EQ(prefix_.size(), 2u);
  }
  child::Spec shim(std::initializer_list<std::string> program) const {
    child::Spec spec;
    spec.argv = prefix_;
    spec.argv.insert(spec.argv.end(), program);
    spec.log_path = scratch_.file("log");
    spec.timeout = std::chrono::seconds(60);
    spec.kill_grace = std::chrono::seconds(5);
    return spec;
  }
  // Waits for the rank's pid in `file` (the rank writes it once started).
  static pid_t rank_pid(const std::string& file) {
    for (int i = 0; i < 600; ++i) {
      const std::string s = posix_fs::read_bytes(file);
      if (!s.empty() && s.back() == '\n') return static_cast<pid_t>(std::stol(s));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }
  static bool gone_within_seconds(pid_t pid, int seconds) {
    for (int i = 0; i < seconds * 20; ++i) {
      if (kill(pid, 0) != 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  Scratch scratch_;
  std::vector<std::string> prefix_;
};

TEST_F(RankServer, TheRankGetsTheShimsArgvEnvironmentDirectoryAndStreamsAndEndsIt) {
  child::Spec spec = shim({});
  spec.argv = {"sh", "-c", "cd \"$1\" && shift && exec \"$@\"", "sh", scratch_.path()};
  spec.argv.insert(spec.argv.end(), prefix_.begin(), prefix_.end());
  spec.argv.insert(spec.argv.end(), {"/the/rank/program", "echo"});
  spec.env = {{"TC_RANK_TEST_X", "42"}};
  const child::Result r = child::run(spec);
  const std::string log = posix_fs::read_bytes(spec.log_path);
  EXPECT_EQ(r.exit_code, 3) << log;
  EXPECT_EQ(r.signal, 0);
  EXPECT_NE(log.find("cwd=" + scratch_.path() + "\n"), std::string::npos) << log;
  EXPECT_NE(log.find("X=42\n"), std::string::npos) << log;
  EXPECT_NE(log.find("inherited=no\n"), std::string::npos) << log;
  EXPECT_NE(log.find("argv0=/the/rank/program argc=2\n"), std::string::npos) << log;
  EXPECT_NE(log.find("to stderr\n"), std::string::npos) << log;
}

TEST_F(RankServer, ARankKilledByASignalEndsTheShimByTheSame) {
  const child::Result r = child::run(shim({"/the/rank/program", "abort"}));
  EXPECT_EQ(r.signal, SIGABRT) << posix_fs::read_bytes(scratch_.file("log"));
  EXPECT_EQ(r.exit_code, 128 + SIGABRT);
}

TEST_F(RankServer, ASignalToTheShimReachesTheRank) {
  const std::string pid_file = scratch_.file("pid");
  child::Process shim_process(shim({"/the/rank/program", "wait", pid_file}));
  const pid_t rank = rank_pid(pid_file);
  ASSERT_GT(rank, 0) << posix_fs::read_bytes(scratch_.file("log"));
  EXPECT_NE(rank, shim_process.pid());  // the rank is the template's fork, not the shim
  ASSERT_EQ(kill(shim_process.pid(), SIGTERM), 0);  // what torchrun sends its workers
  const child::Result r = shim_process.wait();
  EXPECT_EQ(r.signal, SIGTERM) << posix_fs::read_bytes(scratch_.file("log"));
  EXPECT_TRUE(gone_within_seconds(rank, 10));
}

TEST_F(RankServer, AShimKilledOutrightTakesItsRankWithIt) {
  const std::string pid_file = scratch_.file("pid");
  child::Process shim_process(shim({"/the/rank/program", "wait", pid_file}));
  const pid_t rank = rank_pid(pid_file);
  ASSERT_GT(rank, 0) << posix_fs::read_bytes(scratch_.file("log"));
  ASSERT_EQ(kill(shim_process.pid(), SIGKILL), 0);
  EXPECT_EQ(shim_process.wait().signal, SIGKILL);
  EXPECT_TRUE(gone_within_seconds(rank, 10));
}

TEST_F(RankServer, WithoutATemplateTheShimStartsTheProgramByExec) {
  child::Spec spec = shim({"/bin/sh", "-c", "exit 5"});
  spec.argv[1] = scratch_.file("no-such-socket");
  const child::Result r = child::run(spec);
  EXPECT_EQ(r.exit_code, 5);
  EXPECT_NE(posix_fs::read_bytes(spec.log_path).find("starting /bin/sh by exec"), std::string::npos) << posix_fs::read_bytes(spec.log_path);
}

TEST_F(RankServer, OnlyCpuCellsAndOnlyBesideAShim) {
  EXPECT_TRUE(rank_server::launcher_prefix("cuda", test_paths::torchconform_binary()).empty());
  EXPECT_TRUE(rank_server::launcher_prefix("cpu", scratch_.file("torchconform")).empty());  // no shim there
  EXPECT_EQ(rank_server::shim_next_to("torchconform"), "");
}

}  // namespace
}  // namespace tc
