// `torchconform run --python FILE.py:Class[=name]` end to end: the command line loads the Python
// recipe through the contract's hook (harness/contract/python_loader.h), the runner drives it
// through a check registered here, and the report says what happened: a pass, the Python error with
// the user's file:line as a failing cell's evidence, a missing probe as a skipped cell.
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "harness/cli.h"
#include "harness/contract/registry.h"
#include "harness/contract/run.h"
#include "harness/contract/scratch.h"
#include "harness/report_json.h"
#include "harness/testing/test_paths.h"

namespace tc {
namespace {

const std::string kTiny = std::string(tc::test_paths::source_dir()) + "/python/tests/tiny_run.py";

// One train step, and what the check was handed to start the binary again.
CheckResult check_python_smoke(const CheckContext& ctx) {
  auto run = ctx.make_run();
  RunOptions o;
  o.seed = ctx.seed;
  run->setup(o);
  nlohmann::json m;
  m["loss"] = run->train_step().loss;
  m["python_specs"] = ctx.python_specs;
  return CheckResult::pass("trained one step", m);
}
TC_CHECK(python_smoke, "a Python recipe trains through the command line")->Promise("trains");

// Needs a probe tiny_run does not provide: skipped, as for a C++ recipe without it.
CheckResult check_python_needs_predict(const CheckContext& ctx) {
  auto run = ctx.make_run();
  RunOptions o;
  o.seed = ctx.seed;
  run->setup(o);
  run->predict(run->example_input(1));
  return CheckResult::pass("predicted");
}
TC_CHECK(python_needs_predict, "a check needing predict()")->Promise("predicts");

// `torchconform ARGS...` in this process; returns the exit code.
int cli(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return cli_main(static_cast<int>(argv.size()), argv.data());
}

// `torchconform run ...` in this process; returns the exit code and reads the report.
int run_cli(std::vector<std::string> args, Report* report) {
  const Scratch scratch("tc-python-cli-");  // removed with the report once it is read
  const std::string json = scratch.file("report.json");
  args.insert(args.begin(), {"torchconform", "run", "--in-process", "--device", "cpu"});
  args.insert(args.end(), {"--json", json, "--html", ""});
  const int rc = cli(std::move(args));
  if (report != nullptr) *report = read_report_file(json);
  return rc;
}

TEST(PythonCli, RunsAPythonRecipeAndPassesItsSpecOnAbsolute) {
  const std::string cwd = get_current_dir_name();
  ASSERT_EQ(chdir(tc::test_paths::source_dir()), 0);  // a spec relative to the working directory
  Report r;
  const int rc = run_cli({"--python", "python/tests/tiny_run.py:TinyRun=tiny_cli", "--check", "python_smoke",
                          "--recipe", "tiny_cli"}, &r);
  ASSERT_EQ(chdir(cwd.c_str()), 0);
  EXPECT_EQ(rc, 0);
  ASSERT_EQ(r.cells.size(), 1u);
  EXPECT_EQ(r.cells[0].verdict, Verdict::kOk) << r.cells[0].evidence;
  EXPECT_EQ(r.cells[0].role, Role::kSubject);
  EXPECT_GT(r.cells[0].metrics["loss"].get<double>(), 0.0);
  EXPECT_EQ(r.cells[0].metrics["python_specs"], nlohmann::json::array({kTiny + ":TinyRun=tiny_cli"}));
}

// A process started again for a cell loads that cell's recipe alone: its RecipeInfo::load_spec,
// not every --python of the run.
TEST(PythonCli, ACellPassesOnItsOwnRecipesSpecAlone) {
  Report r;
  const int rc = run_cli({"--python", kTiny + ":TinyRun=tiny_a", "--python", kTiny + ":TinyRun=tiny_b", "--check",
                          "python_smoke", "--recipe", "tiny_b"}, &r);
  EXPECT_EQ(rc, 0);
  ASSERT_EQ(r.cells.size(), 1u);
  EXPECT_EQ(r.cells[0].recipe, "tiny_b");
  EXPECT_EQ(r.cells[0].metrics["python_specs"], nlohmann::json::array({kTiny + ":TinyRun=tiny_b"}));
}

TEST(PythonCli, APythonErrorIsTheFailingCellsEvidenceWithTheUsersLine) {
  Report r;
  EXPECT_EQ(run_cli({"--python", kTiny + ":FailingRun=failing_cli", "--check", "python_smoke", "--recipe",
                     "failing_cli"}, &r), 1);
  ASSERT_EQ(r.cells.size(), 1u);
  EXPECT_EQ(r.cells[0].verdict, Verdict::kFail);
  EXPECT_NE(r.cells[0].evidence.find("ValueError: the step fell over"), std::string::npos) << r.cells[0].evidence;
  EXPECT_NE(r.cells[0].evidence.find(kTiny + ":"), std::string::npos) << r.cells[0].evidence;
}

TEST(PythonCli, AMissingProbeSkipsTheCell) {
  Report r;
  EXPECT_EQ(run_cli({"--python", kTiny + ":TinyRun=tiny_probe", "--check", "python_needs_predict", "--recipe",
                     "tiny_probe"}, &r), 77);
  ASSERT_EQ(r.cells.size(), 1u);
  EXPECT_EQ(r.cells[0].verdict, Verdict::kSkipped);
  EXPECT_NE(r.cells[0].evidence.find("does not provide predict()"), std::string::npos) << r.cells[0].evidence;
}

// A Python class declaring what must catch it is a variant, judged as a C++ one: python_smoke cannot
// catch it, so its cell is `missed` (exit 1); `list --python` shows its targets and its language, and
// every cell of a Python recipe says "python".
TEST(PythonCli, APythonVariantIsJudgedAsAVariantAndItsLanguageIsReported) {
  Report r;
  EXPECT_EQ(run_cli({"--python", kTiny + ":DeclaredVariant=declared_cli", "--check", "python_smoke", "--recipe",
                     "declared_cli"}, &r), 1);
  ASSERT_EQ(r.cells.size(), 1u);
  EXPECT_EQ(r.cells[0].role, Role::kVariant);
  EXPECT_EQ(r.cells[0].expected, Expected::kFail);
  EXPECT_EQ(r.cells[0].verdict, Verdict::kMissed) << r.cells[0].evidence;
  EXPECT_EQ(r.cells[0].language, "python");

  ::testing::internal::CaptureStdout();
  ASSERT_EQ(cli({"torchconform", "list", "--json", "--python", kTiny + ":DeclaredVariant=declared_list"}), 0);
  const nlohmann::json catalogue = nlohmann::json::parse(::testing::internal::GetCapturedStdout());
  bool seen = false;
  for (const nlohmann::json& recipe : catalogue["recipes"]) {
    if (recipe["name"] != "declared_list") continue;
    seen = true;
    EXPECT_EQ(recipe["targets"], nlohmann::json::array({"python_smoke"}));
    EXPECT_EQ(recipe["breaks"]["python_smoke"], nlohmann::json::array({"trains"}));
    EXPECT_EQ(recipe["language"], "python");
  }
  EXPECT_TRUE(seen) << catalogue.dump();
}

TEST(PythonCli, ABadSpecIsBadUsage) {
  EXPECT_EQ(run_cli({"--python", kTiny + ":NoSuchClass", "--check", "python_smoke"}, nullptr), 2);
  EXPECT_EQ(run_cli({"--python", "not-a-spec", "--check", "python_smoke"}, nullptr), 2);
}

TEST(PythonCli, RunHelpDocumentsTheOptionAndTheVenv) {
  ::testing::internal::CaptureStdout();
  const int rc = cli({"torchconform", "run", "--help"});
  const std::string help = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  EXPECT_NE(help.find("--python"), std::string::npos) << help;
  EXPECT_NE(help.find("TORCHCONFORM_VENV"), std::string::npos) << help;
}

}  // namespace
}  // namespace tc
