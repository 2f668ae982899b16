// The one way this program starts a child (harness/child_process.h) and the one way it runs a cell
// in a child and reads its report back (harness/cell_in_child.h): what every caller relies on.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "harness/cell_in_child.h"
#include "harness/child_process.h"
#include "harness/contract/scratch.h"
#include "harness/util/forking.h"
#include "harness/util/posix_fs.h"
#include "harness/util/termination.h"

namespace tc {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ChildProcess, EnvironmentAddedStdinClosedOutputLogged) {
  Scratch scratch;
  child::Spec spec;
  // `cat` reads stdin: it ends at once only because the child's stdin is /dev/null.
  spec.argv = {"sh", "-c", "echo \"X=$TC_CHILD_TEST_X\"; cat; echo err >&2; exit 3"};
  spec.env = {{"TC_CHILD_TEST_X", "42"}};
  spec.log_path = scratch.file("log");
  spec.timeout = std::chrono::seconds(60);
  const child::Result r = child::run(spec);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(read_all(spec.log_path), "X=42\nerr\n");
}

TEST(ChildProcess, TheLogIsAppendedTo) {
  Scratch scratch;
  child::Spec spec;
  spec.argv = {"sh", "-c", "echo second"};
  spec.log_path = scratch.file("log");
  std::ofstream(spec.log_path) << "first\n";
  EXPECT_EQ(child::run(spec).exit_code, 0);
  EXPECT_EQ(read_all(spec.log_path), "first\nsecond\n");
}

TEST(ChildProcess, AProgramThatCannotStartIsNamed) {
  child::Spec spec;
  spec.argv = {"/nonexistent/torchconform-no-such-program", "x"};
  try {
    child::run(spec);
    FAIL() << "started a program that does not exist";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot start '/nonexistent/torchconform-no-such-program'"), std::string::npos)
        << e.what();
  }
}

// The deadline stops the whole group, grandchildren included: the shell's `sleep` would otherwise
// keep the log open. The signal's number shows in the exit code (128 + SIGTERM).
TEST(ChildProcess, TheDeadlineStopsTheGroup) {
  Scratch scratch;
  child::Spec spec;
  spec.argv = {"sh", "-c", "sleep 300 & wait"};
  spec.log_path = scratch.file("log");
  spec.timeout = std::chrono::milliseconds(300);
  const child::Result r = child::run(spec);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.exit_code, 128 + 15);
}

// A group that ignores SIGTERM is killed kill_grace after the deadline (SIGKILL: 128 + 9), not 45 s.
TEST(ChildProcess, AGroupIgnoringSigtermIsKilledAfterTheGrace) {
  Scratch scratch;
  child::Spec spec;
  spec.argv = {"sh", "-c", "trap '' TERM; sleep 300 & wait; sleep 300"};
  spec.log_path = scratch.file("log");
  spec.timeout = std::chrono::milliseconds(300);
  spec.kill_grace = std::chrono::milliseconds(200);
  const child::Result r = child::run(spec);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.exit_code, 128 + 9);
  EXPECT_LT(r.wall_s, 40.0);  // not the default 45 s grace (a bound no load reaches: 300 + 200 ms asked)
}

// A child forked without exec (Spec::body, how a recipe's process starts): the same contract as a
// spawned one. CTest runs this suite in a process of its own, which has one thread until the last
// test starts another.
TEST(ForkedChild, RunsTheBodyInItsOwnGroupWithTheEnvironmentAndLogsItsOutput) {
  ASSERT_TRUE(forking::single_threaded()) << "the suite runs first in its own process (CTest: one per suite)";
  Scratch scratch;
  child::Spec spec;
  spec.body = [] {
    std::printf("X=%s\n", std::getenv("TC_CHILD_TEST_X"));
    std::fflush(stdout);
    std::fprintf(stderr, "err\n");
    return getpgid(0) == getpid() && std::getenv("TORCHCONFORM_PARENT_PID") != nullptr ? 3 : 4;
  };
  spec.env = {{"TC_CHILD_TEST_X", "42"}};
  spec.log_path = scratch.file("log");
  spec.timeout = std::chrono::seconds(60);
  const child::Result r = child::run(spec);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(read_all(spec.log_path), "X=42\nerr\n");
  EXPECT_EQ(std::getenv("TC_CHILD_TEST_X"), nullptr) << "the body's environment is the child's alone";
}

TEST(ForkedChild, ABodyThatThrowsExits70WithItsMessage) {
  Scratch scratch;
  child::Spec spec;
  spec.body = []() -> int { throw std::runtime_error("no cell stream"); };
  spec.log_path = scratch.file("log");
  EXPECT_EQ(child::run(spec).exit_code, 70);
  EXPECT_NE(read_all(spec.log_path).find("the forked process failed: no cell stream"), std::string::npos);
}

TEST(ForkedChild, TheDeadlineStopsIt) {
  Scratch scratch;
  child::Spec spec;
  spec.body = [] {
    sleep(300);
    return 0;
  };
  spec.log_path = scratch.file("log");
  spec.timeout = std::chrono::milliseconds(300);
  spec.kill_grace = std::chrono::milliseconds(200);
  const child::Result r = child::run(spec);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.signal, 15);  // SIGTERM to its group
}

// A child that ends without its destructors (a recipe's os._exit, or SIGKILL: nothing of it runs)
// leaves no scratch directory: the parent removes the ones it had registered. A directory of the
// parent that the child registered for its own signal cleanup only (the cell stream's) stays.
TEST(ForkedChild, ItsScratchIsRemovedWhenItEndsWithoutItsDestructors) {
  Scratch parent_dir;
  const std::string where = parent_dir.file("child-scratch");
  for (const int how : {0, SIGKILL}) {
    child::Spec spec;
    spec.body = [&]() -> int {
      const auto* own = new Scratch("tc-child-test-");  // never destroyed
      std::ofstream(own->file("a")) << "x";
      std::ofstream(where) << own->path();
      termination::register_starting_process_directory(parent_dir.path().c_str());
      if (how == SIGKILL) raise(SIGKILL);
      _exit(0);
    };
    spec.log_path = parent_dir.file("log");
    const child::Result r = child::run(spec);
    EXPECT_EQ(r.signal, how);
    const std::string made = read_all(where);
    ASSERT_FALSE(made.empty()) << read_all(spec.log_path);
    EXPECT_FALSE(posix_fs::exists(made)) << made << " is still there (ended by signal " << how << ")";
    EXPECT_TRUE(posix_fs::exists(parent_dir.file("log"))) << "the parent's directory was removed";
  }
}

// fork copies the calling thread alone: with another thread running (a pool), no fork.
TEST(ForkedChild, IsRefusedWhileAnotherThreadRuns) {
  std::atomic<bool> stop{false};
  std::thread other([&] {
    while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  EXPECT_FALSE(forking::single_threaded());
  child::Spec spec;
  spec.body = [] { return 0; };
  EXPECT_THROW(child::run(spec), std::runtime_error);
  stop = true;
  other.join();
}

// A child that writes no report: a HarnessError naming the child, its exit code and its output.
TEST(CellInChild, NoReportIsAHarnessErrorWithTheOutput) {
  CheckContext ctx;
  ctx.check = "some_check";
  ctx.recipe = "some_recipe";
  ctx.device = "cpu";
  CellChild spec;
  spec.launcher = {"sh", "-c", "echo 'nothing here'; exit 4", "sh"};  // the binary's argv follows, as $@
  spec.executable = "/bin/true";
  spec.what = "the test child";
  try {
    run_cell_in_child(spec, ctx);
    FAIL() << "no report, no error";
  } catch (const HarnessError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("the test child exited with 4 and wrote no report"), std::string::npos) << m;
    EXPECT_NE(m.find("nothing here"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace tc
