#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

#include <ATen/Parallel.h>
#include <c10/core/DefaultDtype.h>
#include <c10/util/typeid.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <sstream>

#include "harness/console.h"
#include "harness/contract/record.h"
#include "harness/runner.h"
#include "harness/contract/run.h"

namespace tc {
namespace {

TEST(Verdict, JudgeCoversEveryExpectedOutcomePair) {
  EXPECT_EQ(judge(Expected::kPass, Outcome::kPass, Role::kReference), Verdict::kOk);
  EXPECT_EQ(judge(Expected::kPass, Outcome::kFail, Role::kReference), Verdict::kFalseAlarm);
  EXPECT_EQ(judge(Expected::kFail, Outcome::kFail, Role::kVariant), Verdict::kOk);
  EXPECT_EQ(judge(Expected::kFail, Outcome::kPass, Role::kVariant), Verdict::kMissed);
  EXPECT_EQ(judge(Expected::kAny, Outcome::kPass, Role::kVariant), Verdict::kOk);
  EXPECT_EQ(judge(Expected::kAny, Outcome::kFail, Role::kVariant), Verdict::kOk);
  EXPECT_EQ(judge(Expected::kPass, Outcome::kNone, Role::kReference), Verdict::kError);
}

// A subject (a user's recipe) failing is the finding itself, not the suite's false alarm.
TEST(Verdict, ASubjectFailingIsFailAndPassingIsOk) {
  EXPECT_EQ(judge(Expected::kPass, Outcome::kFail, Role::kSubject), Verdict::kFail);
  EXPECT_EQ(judge(Expected::kPass, Outcome::kPass, Role::kSubject), Verdict::kOk);
  EXPECT_EQ(judge(Expected::kPass, Outcome::kNone, Role::kSubject), Verdict::kError);
  EXPECT_STREQ(to_string(Verdict::kFail), "fail");
  EXPECT_EQ(verdict_from_string("fail"), Verdict::kFail);
  for (Role r : {Role::kReference, Role::kVariant, Role::kSubject}) EXPECT_EQ(role_from_string(to_string(r)), r);
  EXPECT_THROW(role_from_string("user"), std::invalid_argument);
}

TEST(Verdict, TheRoleOfARecipeIsItsRegistration) {
  RecipeInfo r;
  EXPECT_EQ(r.role(), Role::kSubject);  // registered with no attribute: a user's recipe
  r.control = true;
  EXPECT_EQ(r.role(), Role::kReference);
  r.targets = {"reproducibility"};
  EXPECT_EQ(r.role(), Role::kVariant);
}

TEST(Verdict, ExitCodeIsOneForAnythingButOkOrSkipped) {
  std::vector<Cell> cells(2);
  cells[0].verdict = Verdict::kOk;
  cells[1].verdict = Verdict::kSkipped;
  EXPECT_EQ(exit_code_for(cells), 0);
  for (Verdict bad : {Verdict::kMissed, Verdict::kFalseAlarm, Verdict::kFail, Verdict::kError}) {
    cells[1].verdict = bad;
    EXPECT_EQ(exit_code_for(cells), 1) << to_string(bad);
  }
}

// Nothing checked is not a pass: 77, CTest's SKIP_RETURN_CODE for the conformance tests.
TEST(Verdict, ExitCodeIsSeventySevenWhenEveryCellWasSkipped) {
  std::vector<Cell> cells(2);
  cells[0].verdict = Verdict::kSkipped;
  cells[1].verdict = Verdict::kSkipped;
  EXPECT_EQ(exit_code_for(cells), 77);
  cells[1].verdict = Verdict::kError;
  EXPECT_EQ(exit_code_for(cells), 1);
  EXPECT_EQ(exit_code_for({}), 0);
}

TEST(Verdict, SummaryCountsEveryVerdict) {
  std::vector<Cell> cells(3);
  cells[0].verdict = Verdict::kOk;
  cells[1].verdict = Verdict::kOk;
  cells[2].verdict = Verdict::kMissed;
  Summary s = summarize(cells);
  EXPECT_EQ(s.total, 3);
  EXPECT_EQ(s.counts.at("ok"), 2);
  EXPECT_EQ(s.counts.at("missed"), 1);
  EXPECT_EQ(s.counts.at("skipped"), 0);
  EXPECT_EQ(s.counts.at("fail"), 0);
  EXPECT_EQ(s.counts.size(), 6u);
}

// The teeth per check: controls judged and failed, targeted variants caught and missed, and apart
// from both rates the skipped, the errors and a variant whose declared promises were all recorded.
TEST(Verdict, SummaryTeethCountsControlsAndVariantsAndWhatWasNotJudgedApart) {
  auto cell = [](Role role, Expected expected, Verdict verdict, nlohmann::json metrics = nlohmann::json::object()) {
    Cell c;
    c.check = "step_hygiene";
    c.role = role;
    c.expected = expected;
    c.verdict = verdict;
    c.metrics = std::move(metrics);
    return c;
  };
  const nlohmann::json recorded = {{"promises", {{{"id", "clip"}, {"status", "recorded"}}}}, {"declared_breaks", {"clip"}}};
  const nlohmann::json broke_other = {{"promises", {{{"id", "clip"}, {"status", "recorded"}}, {{"id", "fresh"}, {"status", "held"}}}},
                                      {"declared_breaks", {"clip", "fresh"}}};
  std::vector<Cell> cells = {
      cell(Role::kReference, Expected::kPass, Verdict::kOk),
      cell(Role::kReference, Expected::kPass, Verdict::kOk, {{"promises", {{{"id", "clip"}, {"status", "recorded"}}}}}),
      cell(Role::kReference, Expected::kPass, Verdict::kFalseAlarm),
      cell(Role::kReference, Expected::kPass, Verdict::kSkipped),
      cell(Role::kVariant, Expected::kFail, Verdict::kOk),
      cell(Role::kVariant, Expected::kFail, Verdict::kOk),
      cell(Role::kVariant, Expected::kFail, Verdict::kMissed, recorded),     // its promise never judged
      cell(Role::kVariant, Expected::kFail, Verdict::kMissed, broke_other),  // one declared promise held: missed
      cell(Role::kVariant, Expected::kFail, Verdict::kError),
      cell(Role::kVariant, Expected::kAny, Verdict::kOk),                    // not aimed at this check
      cell(Role::kSubject, Expected::kPass, Verdict::kFail),                 // a user's recipe: no teeth
  };
  const Summary::Teeth t = summarize(cells).teeth.at("step_hygiene");
  EXPECT_EQ(t.controls, 3);
  EXPECT_EQ(t.false_alarms, 1);
  EXPECT_EQ(t.controls_not_judged, 1);
  EXPECT_EQ(t.variants, 3);
  EXPECT_EQ(t.caught, 2);
  EXPECT_EQ(t.missed, 1);
  EXPECT_EQ(t.variants_not_judged, 1);
  EXPECT_EQ(t.errors, 1);
  EXPECT_EQ(t.skipped, 1);
  EXPECT_DOUBLE_EQ(t.mutation_score(), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(t.false_alarm_rate(), 1.0 / 3.0);
  EXPECT_LT(Summary::Teeth{}.mutation_score(), 0.0);  // nothing to divide
  cells.erase(cells.begin(), cells.end() - 1);
  EXPECT_TRUE(summarize(cells).teeth.empty());  // a subject alone: no teeth to count
}

TEST(Verdict, SummaryCountsTheRolesApart) {
  std::vector<Cell> cells(4);
  cells[0].role = Role::kReference, cells[0].verdict = Verdict::kOk;
  cells[1].role = Role::kVariant, cells[1].verdict = Verdict::kOk;
  cells[2].role = Role::kSubject, cells[2].verdict = Verdict::kFail;
  cells[3].role = Role::kSubject, cells[3].verdict = Verdict::kOk;
  Summary s = summarize(cells);
  EXPECT_EQ(s.counts.at("fail"), 1);
  EXPECT_EQ(s.by_role.at("subject").at("fail"), 1);
  EXPECT_EQ(s.by_role.at("subject").at("ok"), 1);
  EXPECT_EQ(s.by_role.at("subject").at("total"), 2);
  EXPECT_EQ(s.by_role.at("reference").at("total"), 1);
  EXPECT_EQ(s.by_role.at("reference").at("fail"), 0);
  EXPECT_EQ(s.by_role.at("variant").at("ok"), 1);
  cells.pop_back(), cells.pop_back();
  EXPECT_EQ(summarize(cells).by_role.count("subject"), 0u);  // only the roles that have cells
}

// A registry whose checks never touch a recipe: the runner's own logic in isolation.
class RunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto none = [] { return std::unique_ptr<::tc::Run>(); };
    reg.add_check({"passes", "p", [](const CheckContext&) { return CheckResult::pass("held"); }, "t", 1});
    // Fails as the kit's Findings do: its broken promise named in metrics.promises.
    CheckInfo fails{"fails", "p",
                    [](const CheckContext&) {
                      return CheckResult::fail(
                          "broke", {{"promises", {{{"id", "same"}, {"status", "broken"}, {"evidence", "broke"}}}}});
                    },
                    "t", 2};
    fails.promises = {{"same", "the same"}};
    reg.add_check(fails);
    reg.add_check({"throws", "p",
                   [](const CheckContext&) -> CheckResult { throw std::runtime_error("boom in recipe"); },
                   "t", 3});
    reg.add_check({"harness", "p",
                   [](const CheckContext&) -> CheckResult { throw HarnessError("disk full"); }, "t", 4});
    reg.add_check({"skips", "p",
                   [](const CheckContext&) -> CheckResult { throw SkipCell("needs 2 GPUs"); }, "t", 5});
    reg.add_recipe({"reference", "ok", {}, none, "t", 6, "", /*control=*/true});
    reg.add_recipe({"variant", "broken", {"fails", "passes"}, none, "t", 7});
    reg.add_recipe({"mine", "a user's recipe", {}, none, "t", 8});
    plan.devices = {{"cpu", true, ""}};
  }
  Cell only(const std::string& check, const std::string& recipe) {
    plan.checks = {check};
    plan.recipes = {recipe};
    auto cells = run_cells(reg, plan);
    EXPECT_EQ(cells.size(), 1u);
    return cells.at(0);
  }
  Registry reg;
  RunPlan plan;
};

TEST_F(RunnerTest, CrossesChecksRecipesAndDevices) {
  plan.devices = {{"cpu", true, ""}, {"cuda", false, "no CUDA device"}};
  auto cells = run_cells(reg, plan);
  EXPECT_EQ(cells.size(), 5u * 3u * 2u);
}

TEST_F(RunnerTest, ReferencePassingIsOkAndFailingIsFalseAlarm) {
  EXPECT_EQ(only("passes", "reference").verdict, Verdict::kOk);
  Cell c = only("fails", "reference");
  EXPECT_EQ(c.verdict, Verdict::kFalseAlarm);
  EXPECT_EQ(c.evidence, "broke");
}

TEST_F(RunnerTest, ASubjectFailingIsFailNotAFalseAlarm) {
  Cell ok = only("passes", "mine");
  EXPECT_EQ(ok.role, Role::kSubject);
  EXPECT_EQ(ok.verdict, Verdict::kOk);
  Cell c = only("fails", "mine");
  EXPECT_EQ(c.role, Role::kSubject);
  EXPECT_EQ(c.expected, Expected::kPass);
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_EQ(c.evidence, "broke");
  EXPECT_EQ(exit_code_for({c}), 1);
  Cell t = only("throws", "mine");
  EXPECT_EQ(t.verdict, Verdict::kFail);
  EXPECT_NE(t.evidence.find("boom in recipe"), std::string::npos);
  EXPECT_EQ(only("fails", "reference").role, Role::kReference);
  EXPECT_EQ(only("fails", "variant").role, Role::kVariant);
}

// The check reads the recipe's role and `run --sweep` from its context.
TEST_F(RunnerTest, TheCheckSeesTheRoleAndTheSweepFlag) {
  std::vector<std::pair<Role, bool>> seen;
  reg.add_check({"records", "p",
                 [&seen](const CheckContext& ctx) {
                   seen.emplace_back(ctx.role, ctx.sweep);
                   return CheckResult::pass("held");
                 },
                 "t", 9});
  only("records", "mine");
  plan.sweep = true;
  only("records", "reference");
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], std::make_pair(Role::kSubject, false));
  EXPECT_EQ(seen[1], std::make_pair(Role::kReference, true));
}

TEST_F(RunnerTest, VariantPassingATargetedCheckIsMissed) {
  Cell c = only("passes", "variant");
  EXPECT_EQ(c.expected, Expected::kFail);
  EXPECT_EQ(c.verdict, Verdict::kMissed);
  EXPECT_EQ(only("fails", "variant").verdict, Verdict::kOk);
}

// A variant that declares the promise it breaks (->Breaks) is caught only by that promise: caught
// by another promise of the check alone, the promise it breaks has lost its teeth (missed).
TEST_F(RunnerTest, AVariantCaughtOnlyByAnotherPromiseThanTheOneItBreaksIsMissed) {
  CheckInfo two{"two", "p",
                [](const CheckContext&) {
                  return CheckResult::fail("broke other",
                                           {{"promises",
                                             {{{"id", "own"}, {"status", "held"}, {"evidence", "held"}},
                                              {{"id", "other"}, {"status", "broken"}, {"evidence", "broke"}}}}});
                },
                "t", 10};
  two.promises = {{"own", "its own"}, {"other", "another"}};
  reg.add_check(two);
  auto none = [] { return std::unique_ptr<::tc::Run>(); };
  reg.add_recipe({"breaks_own", "breaks own", {"two"}, none, "t", 11});
  reg.find_recipe("breaks_own")->breaks = {{"two", {"own"}}};
  reg.add_recipe({"breaks_other", "breaks other", {"two"}, none, "t", 12});
  reg.find_recipe("breaks_other")->breaks = {{"two", {"other"}}};
  EXPECT_TRUE(reg.validate().empty());
  Cell missed = only("two", "breaks_own");
  EXPECT_EQ(missed.outcome, Outcome::kFail);
  EXPECT_EQ(missed.verdict, Verdict::kMissed) << missed.evidence;
  EXPECT_EQ(missed.evidence.rfind("caught only by other, not by the promise it breaks (own)", 0), 0u) << missed.evidence;
  EXPECT_EQ(only("two", "breaks_other").verdict, Verdict::kOk);
  // Declaring a promise the check does not register, or a check it does not target, is a mistake.
  reg.find_recipe("breaks_other")->breaks = {{"two", {"nope"}}, {"passes", {"x"}}};
  const std::vector<std::string> problems = reg.validate();
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("does not target"), std::string::npos) << problems[0];
  EXPECT_NE(problems[1].find("breaks promise 'nope', which check 'two' does not register"), std::string::npos)
      << problems[1];
}

// A variant that declares no promise it breaks is caught only by a promise that is not a timing
// promise: broken by a time measurement alone (which the machine's speed and load break too), it is
// missed; broken by a non-timing promise, caught.
TEST_F(RunnerTest, AVariantWithoutBreaksCaughtOnlyByATimingPromiseIsMissed) {
  auto breaking = [](const char* id) {
    return [id](const CheckContext&) {
      return CheckResult::fail(std::string("broke ") + id,
                               {{"promises", {{{"id", id}, {"status", "broken"}, {"evidence", "broke"}}}}});
    };
  };
  CheckInfo timed{"timed", "p", breaking("speed"), "t", 20};
  timed.promises = {{"exact", "an exact promise"}, {"speed", "a timing promise"}};
  timed.promises[1].timing = true;
  CheckInfo exact = timed;
  exact.name = "exact";
  exact.fn = breaking("exact");
  reg.add_check(timed);
  reg.add_check(exact);
  auto none = [] { return std::unique_ptr<::tc::Run>(); };
  reg.add_recipe({"no_breaks", "declares no ->Breaks", {"timed", "exact"}, none, "t", 21});
  Cell by_time = only("timed", "no_breaks");
  EXPECT_EQ(by_time.outcome, Outcome::kFail);
  EXPECT_EQ(by_time.verdict, Verdict::kMissed) << by_time.evidence;
  EXPECT_EQ(by_time.evidence.rfind("caught only by the timing promise(s) speed", 0), 0u) << by_time.evidence;
  EXPECT_EQ(only("exact", "no_breaks").verdict, Verdict::kOk);
}

// A recipe runs in the judging process: what its code leaves changed (default dtype, grad mode,
// intra-op threads, working directory) is named in its own cell and put back before the next one,
// whose code starts from the state the run started with.
TEST_F(RunnerTest, ACellThatChangesTheProcessIsToldSoAndTheNextCellStartsClean) {
  char buf[PATH_MAX];
  ASSERT_NE(getcwd(buf, sizeof buf), nullptr);
  const std::string cwd = buf;
  const int threads = at::get_num_threads();
  reg.add_check({"leaks", "p",
                 [](const CheckContext&) {
                   c10::set_default_dtype(caffe2::TypeMeta::Make<double>());
                   c10::GradMode::set_enabled(false);
                   at::set_num_threads(at::get_num_threads() + 1);
                   if (chdir("/") != 0) throw std::runtime_error("chdir");
                   return CheckResult::pass("held");
                 },
                 "t", 30});
  std::string seen;
  reg.add_check({"observes", "p",
                 [&seen](const CheckContext&) {
                   seen = std::string(c10::get_default_dtype().name()) + (c10::GradMode::is_enabled() ? " grad" : " nograd");
                   return CheckResult::pass("held");
                 },
                 "t", 31});
  const Cell leaked = only("leaks", "mine");
  EXPECT_EQ(leaked.verdict, Verdict::kOk);
  EXPECT_NE(leaked.evidence.find("the cell left the process changed"), std::string::npos) << leaked.evidence;
  EXPECT_NE(leaked.evidence.find("the default dtype (double, restored to float)"), std::string::npos) << leaked.evidence;
  EXPECT_NE(leaked.evidence.find("grad mode (off, restored to on)"), std::string::npos) << leaked.evidence;
  EXPECT_NE(leaked.evidence.find("intra-op threads"), std::string::npos) << leaked.evidence;
  EXPECT_NE(leaked.evidence.find("the working directory (/, restored to " + cwd + ")"), std::string::npos)
      << leaked.evidence;
  const Cell next = only("observes", "reference");
  EXPECT_EQ(seen, "float grad");
  EXPECT_EQ(next.evidence.find("left the process changed"), std::string::npos) << next.evidence;
  EXPECT_EQ(at::get_num_threads(), threads);
  ASSERT_NE(getcwd(buf, sizeof buf), nullptr);
  EXPECT_EQ(std::string(buf), cwd);
}

// A check that skips a cell of a variant it must catch (a missing probe, a precondition) has not
// caught it: error, not skipped (its ctest would read as skipped). Other cells skip as asked.
TEST_F(RunnerTest, ASkippedTargetedVariantIsAnError) {
  auto none = [] { return std::unique_ptr<::tc::Run>(); };
  reg.add_recipe({"skipped_variant", "targets skips", {"skips"}, none, "t", 13});
  Cell c = only("skips", "skipped_variant");
  EXPECT_EQ(c.verdict, Verdict::kError);
  EXPECT_NE(c.evidence.find("needs 2 GPUs"), std::string::npos) << c.evidence;
  EXPECT_EQ(only("skips", "variant").verdict, Verdict::kSkipped);  // not targeted: any
  EXPECT_EQ(only("skips", "reference").verdict, Verdict::kSkipped);
}

TEST_F(RunnerTest, RecipeThrowingIsAFailWithTheErrorAsEvidence) {
  Cell c = only("throws", "reference");
  EXPECT_EQ(c.outcome, Outcome::kFail);
  EXPECT_EQ(c.verdict, Verdict::kFalseAlarm);
  EXPECT_NE(c.evidence.find("boom in recipe"), std::string::npos);
}

// A targeted variant is caught only by a registered promise of the check breaking: a fail that
// names none (a bug in the check, a timeout), or one naming a promise the check does not have, is
// an error, not a catch.
TEST_F(RunnerTest, VariantFailingWithoutABrokenPromiseIsAnErrorNotACatch) {
  CheckInfo bare{"bare", "p", [](const CheckContext&) { return CheckResult::fail("index out of range"); }, "t", 10};
  bare.promises = {{"same", "the same"}};
  reg.add_check(bare);
  CheckInfo stranger{"stranger", "p",
                     [](const CheckContext&) {
                       return CheckResult::fail(
                           "x", {{"promises", {{{"id", "other"}, {"status", "broken"}, {"evidence", "x"}}}}});
                     },
                     "t", 11};
  stranger.promises = {{"same", "the same"}};
  reg.add_check(stranger);
  reg.add_recipe({"targets_both", "broken", {"bare", "stranger"}, [] { return std::unique_ptr<::tc::Run>(); }, "t", 12});
  Cell c = only("bare", "targets_both");
  EXPECT_EQ(c.outcome, Outcome::kFail);
  EXPECT_EQ(c.verdict, Verdict::kError);
  EXPECT_EQ(c.evidence, "failed without breaking a targeted promise (not a catch): index out of range");
  EXPECT_EQ(only("stranger", "targets_both").verdict, Verdict::kError);
  // The same bare fail on a recipe that is not targeted stays what it was (recorded, not judged).
  EXPECT_EQ(only("bare", "reference").verdict, Verdict::kFalseAlarm);
}

TEST_F(RunnerTest, VariantThrowingIsACatchOnlyWhereTheCheckDeclaresThatError) {
  auto throws_version_error = [](const CheckContext&) -> CheckResult {
    throw std::runtime_error("one of the variables needed for gradient computation has been modified by an inplace operation");
  };
  CheckInfo owner{"owner", "p", throws_version_error, "t", 10};
  owner.promises = {{"version_counter", "no saved tensor is modified"}};
  owner.detects_by_throwing = {{"version_counter", "modified by an inplace operation"}};
  reg.add_check(owner);
  reg.add_check({"bystander", "p", throws_version_error, "t", 11});
  reg.add_recipe({"inplace", "broken", {"owner", "bystander", "throws"}, [] { return std::unique_ptr<::tc::Run>(); }, "t", 12});

  Cell caught = only("owner", "inplace");
  EXPECT_EQ(caught.verdict, Verdict::kOk) << caught.evidence;
  EXPECT_EQ(caught.outcome, Outcome::kFail);
  ASSERT_EQ(caught.metrics["promises"].size(), 1u);
  EXPECT_EQ(caught.metrics["promises"][0]["id"], "version_counter");
  EXPECT_EQ(caught.metrics["promises"][0]["status"], "broken");

  // Another check's error: not a catch, and the check that owns the practice is named once.
  Cell other = only("bystander", "inplace");
  EXPECT_EQ(other.verdict, Verdict::kError);
  EXPECT_EQ(other.evidence.rfind("failed without breaking a targeted promise (not a catch): recipe threw: ", 0), 0u)
      << other.evidence;
  EXPECT_EQ(other.metrics["error_owned_by"]["check"], "owner");
  // Said once for all such cells, in the summary.
  std::ostringstream summary;
  print_error_owners(summary, {other, other, caught});
  EXPECT_EQ(summary.str(),
            "2 cells of inplace threw the error owner detects (\"modified by an inplace operation\"): training "
            "itself breaks that practice; owner's cell is the one to read\n");
  // An error nobody declares (a bug, a timeout, a driver error) is not a catch either.
  Cell boom = only("throws", "inplace");
  EXPECT_EQ(boom.verdict, Verdict::kError);
  EXPECT_NE(boom.evidence.find("boom in recipe"), std::string::npos);
  EXPECT_FALSE(boom.metrics.contains("error_owned_by"));
}

// "recipe threw" carries the error's message, not the C++ backtrace LibTorch appends to what().
TEST_F(RunnerTest, RecipeThrewEvidenceHasNoBacktrace) {
  reg.add_check({"c10", "p",
                 [](const CheckContext&) -> CheckResult {
                   TORCH_CHECK(false, "shapes [2, 3] and [4] do not match");
                   return CheckResult::pass("unreachable");
                 },
                 "t", 10});
  reg.add_check({"copied", "p",
                 [](const CheckContext&) -> CheckResult {
                   throw std::runtime_error("first line\nsecond line\nException raised from f at x.cpp:1 "
                                            "(most recent call first):\nframe #0: g()\nframe #1: h()");
                 },
                 "t", 11});
  Cell c = only("c10", "reference");
  EXPECT_EQ(c.evidence, "recipe threw: shapes [2, 3] and [4] do not match") << c.evidence;
  Cell copied = only("copied", "reference");
  EXPECT_EQ(copied.evidence, "recipe threw: first line\nsecond line") << copied.evidence;
}

TEST_F(RunnerTest, HarnessErrorIsErrorAndSkipIsSkipped) {
  Cell e = only("harness", "reference");
  EXPECT_EQ(e.verdict, Verdict::kError);
  EXPECT_NE(e.evidence.find("disk full"), std::string::npos);
  Cell s = only("skips", "variant");
  EXPECT_EQ(s.verdict, Verdict::kSkipped);
  EXPECT_EQ(s.evidence, "needs 2 GPUs");
}

TEST_F(RunnerTest, UnavailableDeviceGivesSkippedCellsWithTheReason) {
  plan.devices = {{"cuda", false, "no CUDA device: test"}};
  plan.checks = {"passes"};
  auto cells = run_cells(reg, plan);
  ASSERT_EQ(cells.size(), 3u);
  for (const Cell& c : cells) {
    EXPECT_EQ(c.verdict, Verdict::kSkipped);
    EXPECT_EQ(c.evidence, "no CUDA device: test");
  }
}

TEST_F(RunnerTest, UnknownFilterNamesAreRefusedWithTheKnownOnes) {
  plan.checks = {"nope"};
  try {
    run_cells(reg, plan);
    FAIL() << "unknown check accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown check 'nope'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("passes"), std::string::npos);
  }
}

TEST_F(RunnerTest, ProgressCallbacksSeeEveryCell) {
  size_t started = 0, done = 0;
  RunCallbacks cb;
  cb.on_start = [&](const PlannedCell&, size_t, size_t total) { ++started; EXPECT_EQ(total, 15u); };
  cb.on_done = [&](const Cell&, size_t, size_t) { ++done; };
  run_cells(reg, plan, cb);
  EXPECT_EQ(started, 15u);
  EXPECT_EQ(done, 15u);
}

// Multi-process checks are a runner feature: outside torchrun the runner launches them, never calls
// the worker in this process; the preflight skips a cell before anything is launched.
TEST_F(RunnerTest, MultiProcessCheckIsLaunchedNotCalledAndItsPreflightSkipsFirst) {
  bool worker_called = false;
  CheckInfo multi{"multi", "p", [&](const CheckContext&) { worker_called = true; return CheckResult::pass("w"); }, "t", 8};
  multi.ranks = 2;
  multi.preflight = [](const CheckContext& ctx) {
    if (ctx.recipe == "variant") throw SkipCell("the recipe lacks the probe");
  };
  reg.add_check(multi);
  plan.executable = "";  // nothing to launch: the runner says so (harness error), after the preflight
  Cell skipped = only("multi", "variant");
  EXPECT_EQ(skipped.verdict, Verdict::kSkipped);
  EXPECT_EQ(skipped.evidence, "the recipe lacks the probe");
  Cell launched = only("multi", "reference");
  EXPECT_EQ(launched.verdict, Verdict::kError);
  EXPECT_NE(launched.evidence.find("runs as several processes"), std::string::npos) << launched.evidence;
  EXPECT_FALSE(worker_called);
  // As one of torchrun's workers the runner calls the check itself, with the shared directory.
  plan.worker = true;
  plan.work_dir = "/shared/dir";
  std::string seen_dir;
  reg.find_check("multi")->fn = [&](const CheckContext& ctx) { seen_dir = ctx.work_dir; return CheckResult::pass("w"); };
  EXPECT_EQ(only("multi", "reference").verdict, Verdict::kOk);
  EXPECT_EQ(seen_dir, "/shared/dir");
}

// ->Languages: a recipe in another language gets no cell at all (not a skipped one); the run lists
// each left-out check x recipe x device with the check's reason.
TEST_F(RunnerTest, ACheckOfOneLanguageGetsNoCellForARecipeInAnother) {
  CheckInfo py{"python_only", "p", [](const CheckContext&) { return CheckResult::pass("held"); }, "t", 9};
  py.languages = {"python"};
  py.languages_why = "no C++ counterpart";
  reg.add_check(py);
  RecipeInfo snake{"snake", "a Python recipe", {}, [] { return std::unique_ptr<::tc::Run>(); }, "t.py", 1};
  snake.language = "python";
  reg.add_recipe(snake);
  plan.checks = {"python_only", "passes"};
  const std::vector<PlannedCell> cells = plan_cells(reg, plan);
  for (const PlannedCell& c : cells) {
    EXPECT_FALSE(c.check->name == "python_only" && c.recipe->language_name() == "c++") << c.recipe->name;
  }
  EXPECT_EQ(cells.size(), 4u + 1u);  // passes x (3 C++ recipes + snake), python_only x snake
  const std::vector<NotApplicable> out = not_applicable_cells(reg, plan);
  ASSERT_EQ(out.size(), 3u);
  for (const NotApplicable& n : out) {
    EXPECT_EQ(n.check, "python_only");
    EXPECT_EQ(n.device, "cpu");
    EXPECT_EQ(n.reason, "no C++ counterpart");
  }
  // A variant that targets such a check from the other language is a registration error.
  reg.add_recipe({"cpp_variant", "broken", {"python_only"}, [] { return std::unique_ptr<::tc::Run>(); }, "t", 10});
  const std::vector<std::string> problems = reg.validate();
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems.front().find("judges no c++ recipe (no C++ counterpart)"), std::string::npos) << problems.front();
}

// A broken practice of a multi-process check shows only between ranks: in a world of one rank the
// runner skips the variant's cell itself (the check never sees it), and the cell names the world.
TEST_F(RunnerTest, AMultiProcessVariantInAWorldOfOneIsSkippedByTheRunner) {
  CheckInfo multi{"multi", "p", [](const CheckContext&) { return CheckResult::pass("w"); }, "t", 8};
  multi.ranks = 2;
  reg.add_check(multi);
  reg.add_recipe({"multi_variant", "broken", {"multi"}, [] { return std::unique_ptr<::tc::Run>(); }, "t", 11});
  setenv("TORCHCONFORM_DIST_NPROC", "1", 1);
  Cell c = only("multi", "multi_variant");
  unsetenv("TORCHCONFORM_DIST_NPROC");
  EXPECT_EQ(c.verdict, Verdict::kSkipped);
  EXPECT_EQ(c.device, "cpu\u00d71");
  EXPECT_NE(c.evidence.find("shows only between ranks"), std::string::npos) << c.evidence;
  Cell two = only("multi", "multi_variant");  // 2 ranks: launched (nothing to launch here: an error)
  EXPECT_EQ(two.device, "cpu\u00d72");
  EXPECT_NE(two.verdict, Verdict::kSkipped);
}

TEST_F(RunnerTest, ContextCarriesTheCellsExpectationAndTheMachine) {
  CheckContext seen;
  reg.add_check({"ctx", "p", [&](const CheckContext& ctx) { seen = ctx; return CheckResult::pass("w"); }, "t", 9});
  plan.cuda_present = true;
  only("ctx", "variant");
  EXPECT_EQ(seen.expected, Expected::kAny);
  EXPECT_TRUE(seen.recipe_is_variant);
  EXPECT_TRUE(seen.cuda_present);
  only("ctx", "reference");
  EXPECT_EQ(seen.expected, Expected::kPass);
  EXPECT_FALSE(seen.recipe_is_variant);
}

// A fresh process (CheckContext::in_fresh_process) is offered where the runner knows its
// executable, and not inside such a process (ctx.part set); one that writes no report is a
// harness error.
TEST_F(RunnerTest, AFreshProcessIsOfferedOnlyWithAnExecutableAndNotInsideOne) {
  CheckContext seen;
  reg.add_check({"ctx", "p", [&](const CheckContext& ctx) { seen = ctx; return CheckResult::pass("w"); }, "t", 9});
  only("ctx", "reference");
  EXPECT_FALSE(seen.in_fresh_process);
  plan.executable = "/bin/true";  // exits 0 and writes no report
  only("ctx", "reference");
  ASSERT_TRUE(seen.in_fresh_process);
  EXPECT_TRUE(seen.part.empty());
  EXPECT_THROW(seen.in_fresh_process("some_part"), HarnessError);
  plan.part = "some_part";
  only("ctx", "reference");
  EXPECT_FALSE(seen.in_fresh_process);
  EXPECT_EQ(seen.part, "some_part");
}

// `run --judged-only`: a variant gets cells only on the checks it targets (where its verdict is
// judged); correct recipes keep a cell on every check. Without it, the variant's other cells are
// recorded ones (conformance.python.cpu.variants runs the Python checks' variants with it).
TEST_F(RunnerTest, JudgedOnlyLeavesAVariantOutOfTheChecksItDoesNotTarget) {
  plan.checks = {"passes", "fails", "throws"};
  plan.recipes = {"reference", "variant", "mine"};
  auto names = [&] {
    std::vector<std::string> out;
    for (const PlannedCell& c : plan_cells(reg, plan)) out.push_back(c.check->name + "/" + c.recipe->name);
    std::sort(out.begin(), out.end());
    return out;
  };
  const std::vector<std::string> all = names();
  EXPECT_EQ(all.size(), 9u);
  EXPECT_NE(std::find(all.begin(), all.end(), "throws/variant"), all.end());
  plan.judged_only = true;
  const std::vector<std::string> judged = names();
  EXPECT_EQ(judged, (std::vector<std::string>{"fails/mine", "fails/reference", "fails/variant", "passes/mine",
                                              "passes/reference", "passes/variant", "throws/mine", "throws/reference"}));
}

}  // namespace
}  // namespace tc
