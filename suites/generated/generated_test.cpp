// The generator of recipes (issue 44): a seed names one draw, every choice of every dimension is
// reached, the names of draws, mutants and ranges give the recipes they say, and a mutant that is
// equivalent on its draw is left out with the reason. (That each draw passes every check and each
// mutant is caught: the generated.cpu.* tests and generated.sweep.)
#include <set>

#include <gtest/gtest.h>

#include "harness/contract/registry.h"
#include "suites/generated/generated_run.h"

namespace tc::generated {
namespace {

TEST(Generated, ASeedNamesOneDrawAndEveryChoiceIsReached) {
  EXPECT_EQ(draw(17).pick, draw(17).pick);
  EXPECT_EQ(draw(17).describe(), draw(17).describe());
  EXPECT_GE(static_cast<int>(kDims), 8);
  std::array<std::set<int>, kDims> seen;
  std::set<std::string> described;
  for (uint64_t s = 0; s < 500; ++s) {
    const Draw d = draw(s);
    for (int i = 0; i < kDims; ++i) seen[static_cast<size_t>(i)].insert(d.pick[static_cast<size_t>(i)]);
    described.insert(d.describe());
  }
  for (int i = 0; i < kDims; ++i) {
    const Dimension& dim = dimensions()[static_cast<size_t>(i)];
    EXPECT_GE(dim.choices.size(), 2u) << dim.name;
    EXPECT_LE(dim.choices.size(), 5u) << dim.name;
    EXPECT_EQ(seen[static_cast<size_t>(i)].size(), dim.choices.size()) << dim.name;
  }
  EXPECT_GT(described.size(), 490u);  // the product is large: 500 seeds, (almost) 500 recipes
}

TEST(Generated, NamesGiveTheRecipesTheySay) {
  const std::vector<RecipeInfo> one = recipes_named("gen-5");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].name, "gen-5");
  EXPECT_TRUE(one[0].control);
  EXPECT_TRUE(one[0].targets.empty());
  EXPECT_NE(one[0].description.find(draw(5).describe()), std::string::npos);

  const std::vector<RecipeInfo> mutant = recipes_named("gen-5-drop_zero_grad");
  ASSERT_EQ(mutant.size(), 1u);
  EXPECT_EQ(mutant[0].targets, std::vector<std::string>{"step_hygiene"});
  EXPECT_EQ(mutant[0].breaks.at("step_hygiene"), std::vector<std::string>{"fresh_gradients"});
  EXPECT_FALSE(mutant[0].control);

  EXPECT_EQ(recipes_named("gen-3..7").size(), 5u);
  size_t applicable_total = 0, aimed_at_eval_mode = 0;
  for (uint64_t s = 1; s <= 6; ++s) {
    for (const Operator* op : applicable(draw(s))) {
      ++applicable_total;
      aimed_at_eval_mode += std::string(op->check) == "eval_mode";
    }
  }
  EXPECT_EQ(recipes_named("gen-1..6-*").size(), applicable_total);
  EXPECT_EQ(recipes_named("gen-1..6-@eval_mode").size(), aimed_at_eval_mode);
  for (const RecipeInfo& r : recipes_named("gen-1..6-@eval_mode")) EXPECT_EQ(r.targets[0], "eval_mode");

  EXPECT_TRUE(recipes_named("reference").empty());
  EXPECT_TRUE(recipes_named("gen-").empty());
  EXPECT_TRUE(recipes_named("generic").empty());
  EXPECT_THROW(recipes_named("gen-5-no_such_mistake"), std::invalid_argument);
  EXPECT_THROW(recipes_named("gen-9..2"), std::invalid_argument);
}

TEST(Generated, AnEquivalentMutantIsLeftOutWithTheReason) {
  // A draw without accumulation: the micro-batch mistakes change nothing there.
  uint64_t seed = 0;
  while (!draw(seed).is(kAccumulation, "1")) ++seed;
  const Draw d = draw(seed);
  const Operator* op = find_operator("undivided_accumulation");
  ASSERT_NE(op, nullptr);
  EXPECT_FALSE(op->equivalent_on(d).empty());
  for (const Operator* a : applicable(d)) EXPECT_NE(a, op);
  EXPECT_EQ(recipes_named(name_of(seed) + "-*").size(), applicable(d).size());
  try {
    recipes_named(name_of(seed, op));
    ADD_FAILURE() << "an equivalent mutant asked for by name must say why it is not made";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("one micro-batch per step"), std::string::npos) << e.what();
  }
  // Every operator names a registered check and promise.
  for (const Operator& o : operators()) {
    const CheckInfo* c = Registry::global().find_check(o.check);
    ASSERT_NE(c, nullptr) << o.name;
    for (const std::string& p : o.promises) {
      bool found = false;
      for (const PromiseInfo& pi : c->promises) found = found || pi.id == p;
      EXPECT_TRUE(found) << o.name << ": " << o.check << " has no promise " << p;
    }
  }
}

TEST(Generated, TheRegistryMakesThemWhenACommandNamesThem) {
  Registry& reg = Registry::global();
  EXPECT_EQ(reg.find_recipe("gen-424242"), nullptr);
  const std::vector<std::string> names = reg.materialize({"reference", "gen-424242", "gen-424242..424243", "nope"});
  EXPECT_EQ(names, (std::vector<std::string>{"reference", "gen-424242", "gen-424242", "gen-424243", "nope"}));
  ASSERT_NE(reg.find_recipe("gen-424243"), nullptr);
  EXPECT_EQ(reg.find_recipe("gen-424243")->role(), Role::kReference);  // a control: failing is a false alarm
}

}  // namespace
}  // namespace tc::generated
