// Hostile C++ recipes: the reference recipe with one behaviour added that attacks the verdict
// itself rather than breaking a practice (issue 45). Each runs through the runner as `run` runs it
// (each recipe in a process of its own, this binary again: suites/suite_binary_main.cpp registers
// these recipes there too), beside the suite's reference, which must stay `ok` whatever they do.
// The Python ones (os._exit, SIGKILL, abort, a lost event, NaN, zero steps, UTF-8) are
// python/tests/test_hostile.py.
#include <c10/core/DefaultDtype.h>
#include <ATen/Parallel.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <thread>

#include <gtest/gtest.h>

#include "harness/contract/registry.h"
#include "harness/runner.h"
#include "harness/util/posix_fs.h"
#include "reference/reference_run.h"
#include "suites/tests/test_recipes.h"

namespace tc::testing_recipes {
namespace {

// std::exit(0) on the third train_step: atexit handlers run, the status is success.
class ExitsZero : public ref::ReferenceRun {
 public:
  StepRecord train_step() override {
    if (++calls_ == 3) std::exit(0);
    return ReferenceRun::train_step();
  }

 private:
  int calls_ = 0;
};

// A segmentation fault while evaluating (raised, as a stray pointer in a custom kernel would).
class Segfaults : public ref::ReferenceRun {
 public:
  EvalResult evaluate() override {
    std::raise(SIGSEGV);
    return ReferenceRun::evaluate();
  }
};

// Sleeps through evaluate (a lock never released, a peer that never answers).
class Hangs : public ref::ReferenceRun {
 public:
  EvalResult evaluate() override {
    std::this_thread::sleep_for(std::chrono::hours(1));
    return ReferenceRun::evaluate();
  }
};

// Leaves the process changed: float64 default, 1 intra-op thread, grad mode off, the working
// directory /, once its own evaluation is done.
class ChangesTheProcess : public ref::ReferenceRun {
 public:
  EvalResult evaluate() override {
    EvalResult r = ReferenceRun::evaluate();
    c10::set_default_dtype(caffe2::TypeMeta::Make<double>());
    at::set_num_threads(1);
    c10::GradMode::set_enabled(false);
    if (chdir("/") != 0) std::abort();
    return r;
  }
  StepRecord train_step() override {
    c10::AutoGradMode on(true);
    return ReferenceRun::train_step();
  }
};

const bool kRegistered = add({"hostile_cpp_exit_zero", "std::exit(0) in its third train_step", {}, make<ExitsZero>(), __FILE__, __LINE__}) &&
                         add({"hostile_cpp_segfault", "SIGSEGV in evaluate", {}, make<Segfaults>(), __FILE__, __LINE__}) &&
                         add({"hostile_cpp_hang", "sleeps an hour in evaluate", {}, make<Hangs>(), __FILE__, __LINE__}) &&
                         add({"hostile_cpp_world", "leaves dtype, threads, grad mode and cwd changed", {},
                              make<ChangesTheProcess>(), __FILE__, __LINE__});

std::string self() { return tc::posix_fs::executable_path(); }

// `check` on each recipe, in that order, as `run` does it (isolated unless in_process).
std::vector<Cell> run_recipes(const std::string& check, const std::vector<std::string>& recipes, bool in_process,
                              int cell_timeout_s = 0) {
  Registry reg;
  reg.add_check(*Registry::global().find_check(check));
  for (const RecipeInfo& r : Registry::global().recipes()) reg.add_recipe(r);
  add_test_recipes(reg);
  RunPlan plan;
  plan.devices = {{"cpu", true, ""}};
  plan.checks = {check};
  plan.recipes = recipes;
  plan.seed = 5;
  plan.quick = true;
  plan.executable = self();
  plan.isolate = !in_process;
  plan.cell_timeout_s = cell_timeout_s;
  return run_cells(reg, plan);
}

TEST(Hostile, ARecipeThatExitsWithSuccessGivesAnErrorCellAndTheRestIsJudged) {
  const std::vector<Cell> cells = run_recipes("eval_mode", {"hostile_cpp_exit_zero", "reference"}, false);
  ASSERT_EQ(cells.size(), 2u);
  EXPECT_EQ(cells[0].verdict, Verdict::kError) << cells[0].evidence;
  EXPECT_NE(cells[0].evidence.find("exited with status 0 during eval_mode"), std::string::npos) << cells[0].evidence;
  EXPECT_EQ(cells[1].verdict, Verdict::kOk) << cells[1].evidence;
}

TEST(Hostile, ARecipeThatCrashesGivesAnErrorCellNamingTheSignal) {
  const std::vector<Cell> cells = run_recipes("eval_mode", {"hostile_cpp_segfault", "reference"}, false);
  ASSERT_EQ(cells.size(), 2u);
  EXPECT_EQ(cells[0].verdict, Verdict::kError) << cells[0].evidence;
  EXPECT_NE(cells[0].evidence.find("killed by signal 11 (SIGSEGV) during eval_mode"), std::string::npos)
      << cells[0].evidence;
  EXPECT_EQ(cells[1].verdict, Verdict::kOk) << cells[1].evidence;
}

TEST(Hostile, ARecipeThatHangsIsKilledAtTheCellsDeadline) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<Cell> cells = run_recipes("eval_mode", {"hostile_cpp_hang", "reference"}, false, 8);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(cells.size(), 2u);
  EXPECT_EQ(cells[0].verdict, Verdict::kError) << cells[0].evidence;
  EXPECT_NE(cells[0].evidence.find("(the cell's deadline, 8 s: --cell-timeout) during eval_mode"), std::string::npos)
      << cells[0].evidence;
  EXPECT_EQ(cells[1].verdict, Verdict::kOk) << cells[1].evidence;
  EXPECT_LT(waited, 600.0) << "the hour-long sleep was not cut at the deadline";
}

// In one process (--in-process) as in a recipe's own: the next cell starts from the state the run
// started with, and the recipe that changed it is told so in its own cell.
TEST(Hostile, ARecipeThatChangesTheProcessIsToldSoAndTheNextCellStartsClean) {
  for (const bool in_process : {true, false}) {
    const std::vector<Cell> cells = run_recipes("eval_mode", {"hostile_cpp_world", "reference"}, in_process);
    ASSERT_EQ(cells.size(), 2u);
    EXPECT_NE(cells[0].evidence.find("the default dtype (double, restored to float)"), std::string::npos)
        << cells[0].evidence;
    EXPECT_NE(cells[0].evidence.find("grad mode (off, restored to on)"), std::string::npos) << cells[0].evidence;
    EXPECT_NE(cells[0].evidence.find("the working directory (/, restored to"), std::string::npos) << cells[0].evidence;
    EXPECT_EQ(cells[1].verdict, Verdict::kOk) << (in_process ? "in process: " : "isolated: ") << cells[1].evidence;
    EXPECT_EQ(cells[1].evidence.find("left the process changed"), std::string::npos) << cells[1].evidence;
  }
}

}  // namespace
}  // namespace tc::testing_recipes
