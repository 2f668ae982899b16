#include <gtest/gtest.h>

#include "harness/contract/registry.h"
#include "harness/contract/run.h"

namespace tc {
namespace {

CheckResult always_pass(const CheckContext&) { return CheckResult::pass("fine"); }

RecipeInfo recipe(const std::string& name, std::vector<std::string> targets) {
  return RecipeInfo{name, "test recipe", std::move(targets), [] { return std::unique_ptr<::tc::Run>(); },
                    "file.cpp", 7};
}

TEST(Registry, RefusesDuplicateCheckNamingBothPlaces) {
  Registry reg;
  reg.add_check({"repro", "p", always_pass, "a.cpp", 1});
  try {
    reg.add_check({"repro", "p", always_pass, "b.cpp", 2});
    FAIL() << "duplicate accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("a.cpp:1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("b.cpp:2"), std::string::npos) << e.what();
  }
  EXPECT_EQ(reg.checks().size(), 1u);
}

TEST(Registry, RefusesDuplicateRecipeAndEmptyNames) {
  Registry reg;
  reg.add_recipe(recipe("reference", {}));
  EXPECT_THROW(reg.add_recipe(recipe("reference", {})), std::invalid_argument);
  EXPECT_THROW(reg.add_recipe(recipe("", {})), std::invalid_argument);
  EXPECT_THROW(reg.add_check({"", "p", always_pass, "a.cpp", 1}), std::invalid_argument);
  EXPECT_THROW(reg.add_check({"nofn", "p", nullptr, "a.cpp", 1}), std::invalid_argument);
}

TEST(Registry, RegistersInALoop) {
  Registry reg;
  for (int i = 0; i < 5; ++i) reg.add_recipe(recipe(std::string("r").append(std::to_string(i)), {}));
  ASSERT_EQ(reg.recipes().size(), 5u);
  EXPECT_EQ(reg.recipes()[3].name, "r3");
  EXPECT_NE(reg.find_recipe("r4"), nullptr);
  EXPECT_EQ(reg.find_recipe("r9"), nullptr);
}

TEST(Registry, ExpectedPassForCorrectRecipeFailWhereTargetedAnyElsewhere) {
  Registry reg;
  reg.add_check({"a", "p", always_pass, "a.cpp", 1});
  reg.add_check({"b", "p", always_pass, "a.cpp", 2});
  reg.add_recipe(recipe("reference", {}));
  reg.add_recipe(recipe("broken", {"a"}));
  EXPECT_EQ(reg.expected("a", "reference"), Expected::kPass);
  EXPECT_EQ(reg.expected("b", "reference"), Expected::kPass);
  EXPECT_EQ(reg.expected("a", "broken"), Expected::kFail);
  EXPECT_EQ(reg.expected("b", "broken"), Expected::kAny);
  EXPECT_THROW(reg.expected("a", "missing"), std::invalid_argument);
}

TEST(Registry, ValidateFlagsVariantTargetingUnknownCheck) {
  Registry reg;
  reg.add_check({"a", "p", always_pass, "a.cpp", 1});
  reg.add_recipe(recipe("broken", {"a", "typo_check"}));
  auto problems = reg.validate();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("typo_check"), std::string::npos);
  EXPECT_NE(problems[0].find("file.cpp:7"), std::string::npos);
}

// A variant targeting a check that plans no variant cells would be targeted and never run.
TEST(Registry, ValidateRefusesVariantTargetingACorrectRecipesOnlyCheck) {
  Registry reg;
  reg.add_check({"a", "p", always_pass, "a.cpp", 1});
  reg.add_check({"only_correct", "p", always_pass, "b.cpp", 2});
  CheckBuilder(reg, "only_correct").CorrectRecipesOnly();
  reg.add_recipe(recipe("broken", {"a", "only_correct"}));
  auto problems = reg.validate();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("'only_correct', which plans no variant cells (CorrectRecipesOnly)"), std::string::npos)
      << problems[0];
  EXPECT_NE(problems[0].find("file.cpp:7"), std::string::npos) << problems[0];
}

TEST(Registry, ValidateRefusesADeclaredDetectionOfAnUnregisteredPromiseOrAnyError) {
  Registry reg;
  reg.add_check({"a", "p", always_pass, "a.cpp", 1});
  CheckBuilder(reg, "a").Promise("held")->DetectsByThrowing("typo", "modified by an inplace operation")
      ->DetectsByThrowing("held", "");
  const CheckInfo& c = *reg.find_check("a");
  ASSERT_EQ(c.detects_by_throwing.size(), 2u);
  EXPECT_EQ(c.detects_by_throwing[0].message_contains, "modified by an inplace operation");
  auto problems = reg.validate();
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("'typo', which it does not register"), std::string::npos) << problems[0];
  EXPECT_NE(problems[1].find("empty message"), std::string::npos) << problems[1];
}

TEST(Registry, BuilderSetsEveryAttributeOfTheRegisteredCheckAndRecipe) {
  Registry reg;
  reg.add_check({"a", "p", always_pass, "a.cpp", 1});
  CheckBuilder check(reg, "a");
  check.Promise("first", "the first promise")->Promise("second")->MultiProcess(3)->RunsAlone()->Timeout(42)
      ->CorrectRecipesOnly()->Preflight([](const CheckContext&) { throw SkipCell("no probe"); });
  const CheckInfo& c = *reg.find_check("a");
  ASSERT_EQ(c.promises.size(), 2u);
  EXPECT_EQ(c.promises[0].id, "first");
  EXPECT_EQ(c.promises[0].text, "the first promise");
  EXPECT_EQ(c.promises[1].id, "second");
  EXPECT_TRUE(c.multi_process());
  EXPECT_EQ(c.ranks, 3);
  EXPECT_TRUE(c.runs_alone);
  EXPECT_EQ(c.timeout_s, 42);
  EXPECT_FALSE(c.covers_variants);
  EXPECT_THROW(c.preflight(CheckContext{}), SkipCell);

  reg.add_recipe(recipe("broken", {}));
  RecipeBuilder(reg, "broken").MustBeCaughtBy({"a"})->Needs("cuda");
  const RecipeInfo& r = *reg.find_recipe("broken");
  EXPECT_EQ(r.targets, std::vector<std::string>{"a"});
  EXPECT_EQ(r.needs, "cuda");
  EXPECT_TRUE(r.is_variant());
  EXPECT_EQ(reg.expected("a", "broken"), Expected::kFail);
  EXPECT_EQ(r.role(), Role::kVariant);

  reg.add_recipe(recipe("ours", {}));
  EXPECT_EQ(reg.find_recipe("ours")->role(), Role::kSubject);  // no attribute: a user's recipe
  RecipeBuilder(reg, "ours").Control();
  EXPECT_TRUE(reg.find_recipe("ours")->control);
  EXPECT_EQ(reg.find_recipe("ours")->role(), Role::kReference);
  EXPECT_EQ(reg.expected("a", "ours"), Expected::kPass);
}

TEST(Registry, DefaultsOfARegisteredCheck) {
  CheckInfo c{"a", "p", always_pass, "a.cpp", 1};
  EXPECT_FALSE(c.multi_process());
  EXPECT_FALSE(c.runs_alone);
  EXPECT_TRUE(c.covers_variants);
  EXPECT_EQ(c.timeout_s, 900);
  EXPECT_TRUE(c.promises.empty());
}

}  // namespace
}  // namespace tc
