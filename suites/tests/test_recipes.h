// Recipes the suite's tests write: correct ones done differently from the reference (a check must
// pass them). Kept out of the global registry, where every check would give them a cell, and added
// to a test's own registry with add_test_recipes(); tc_suite_tests run as a command line
// (suites/suite_binary_main.cpp) adds them to the global one, so that a check's fresh process
// (CheckContext::in_fresh_process starts this binary again) finds the recipe under test.
#pragma once

#include <unistd.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <torch/torch.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include "harness/contract/registry.h"
#include "harness/runner.h"
#include "harness/util/posix_fs.h"
#include "reference/reference_run.h"

namespace tc::testing_recipes {

// A sampler of the tests' own whose epoch is an order of the dataset's indices and then an
// augmentation seed, both drawn from the loader's generator in set_epoch() (draw() gives the order);
// its state is exactly that (epoch, order, seed), so a checkpoint resumes it mid-epoch.
class DrawnOrderSampler : public ref::Sampler {
 public:
  DrawnOrderSampler(int64_t n, int64_t batch, at::Generator g) : n_(n), batch_(batch), g_(std::move(g)) {}
  void set_epoch(int64_t epoch) override {
    epoch_ = epoch;
    order_ = draw(g_);
    seed_ = static_cast<uint64_t>(torch::randint(1LL << 62, {1}, g_, torch::kLong).item<int64_t>());
  }
  bool has_epoch() const override { return order_.defined(); }
  int64_t epoch() const override { return epoch_; }
  int64_t batches_per_epoch() const override { return n_ / batch_; }
  at::Tensor batch_indices(int64_t b) const override { return order_.narrow(0, b * batch_, batch_); }
  uint64_t epoch_seed() const override { return seed_; }
  void save(torch::serialize::OutputArchive& a) const override {
    if (!has_epoch()) return;
    a.write("epoch", c10::IValue(epoch_));
    a.write("order", order_);
    a.write("seed", c10::IValue(static_cast<int64_t>(seed_)));
  }
  void load(torch::serialize::InputArchive& a) override {
    at::Tensor order;
    if (!a.try_read("order", order)) return;
    c10::IValue e, seed;
    a.read("epoch", e);
    a.read("seed", seed);
    epoch_ = e.toInt();
    seed_ = static_cast<uint64_t>(seed.toInt());
    order_ = order.cpu();
  }

 protected:
  // The epoch's order of the n indices (at least batches_per_epoch() * batch of them).
  virtual at::Tensor draw(at::Generator& g) = 0;
  int64_t n_, batch_;

 private:
  at::Generator g_;
  int64_t epoch_ = -1;
  at::Tensor order_;
  uint64_t seed_ = 0;
};

// Correct, written differently: a model of new_model() (read through model_as<T>()), Flatten -> Linear(3 S S, Hidden) -> ReLU ->
// Linear(Hidden, classes) on the reference's 3 x S x S images, no checkpointed segment.
template <int64_t Hidden>
class FlatMlp : public ref::ReferenceRun {
 protected:
  std::shared_ptr<torch::nn::Module> new_model() const override {
    namespace nn = torch::nn;
    const int64_t in = 3 * config_.data.image_size * config_.data.image_size;
    return nn::Sequential(nn::Flatten(), nn::Linear(in, Hidden), nn::ReLU(), nn::Linear(Hidden, config_.data.classes))
        .ptr();
  }
  at::Tensor model_forward(const at::Tensor& x) override { return model_as<torch::nn::SequentialImpl>().forward(x); }
};

inline std::vector<RecipeInfo>& all() {
  static std::vector<RecipeInfo> recipes;
  return recipes;
}

// Adds every test recipe to `registry`.
inline void add_test_recipes(Registry& registry) {
  for (const RecipeInfo& r : all()) registry.add_recipe(r);
}

inline bool add(RecipeInfo info) {
  all().push_back(std::move(info));
  return true;
}

// One cell on the CPU: `check` on `recipe` (a registered one or a test recipe), run as the command
// line runs it (a fresh process, where the check asks for one, is this binary again).
inline Cell run_one(const std::string& check, const std::string& recipe, int64_t seed = 11) {
  Registry reg;
  for (const CheckInfo& c : Registry::global().checks()) {
    if (c.name == check) reg.add_check(c);
  }
  for (const RecipeInfo& r : Registry::global().recipes()) reg.add_recipe(r);
  add_test_recipes(reg);
  RunPlan plan;
  plan.devices = {{"cpu", true, ""}};
  plan.checks = {check};
  plan.recipes = {recipe};
  plan.seed = seed;
  plan.executable = tc::posix_fs::executable_path();
  return run_cells(reg, plan).at(0);
}

// One cell on the CPU: `check` on a one-off recipe `recipe` that `make` builds (no expectations: a
// subject under test), registered only for this cell.
inline Cell run_one(const std::string& check, const std::string& recipe, RunFactory make, int64_t seed = 11) {
  Registry reg;
  reg.add_check(*Registry::global().find_check(check));
  reg.add_recipe({recipe, "test-only recipe", {}, std::move(make), __FILE__, __LINE__});
  RunPlan plan;
  plan.devices = {{"cpu", true, ""}};
  plan.checks = {check};
  plan.seed = seed;
  return run_cells(reg, plan).at(0);
}

// The statuses metrics.promises gives `id` ("held", "broken", "recorded"; comma-joined where the id
// appears more than once, e.g. once per dtype), "" when absent.
inline std::string promise_status(const Cell& c, const std::string& id) {
  if (!c.metrics.is_object() || !c.metrics.contains("promises")) return "";
  std::string s;
  for (const auto& p : c.metrics["promises"]) {
    if (p.value("id", "") != id) continue;
    if (!s.empty()) s += ',';
    s += p.value("status", std::string());
  }
  return s;
}

template <typename T>
RunFactory make() {
  return [] { return std::unique_ptr<Run>(new T()); };
}

// Every promise the cell judged held (or was recorded as not judged, with its reason), timing
// promises aside (what they measure depends on the machine and its load; their own tests assert
// them): no false alarm on correct code.
inline void expect_nothing_broken(const Cell& c, const std::string& check, const std::string& recipe) {
  std::cout << check << " / " << recipe << " [" << to_string(c.verdict) << "]: " << c.evidence << "\n";
  EXPECT_NE(c.outcome, Outcome::kNone) << check << " / " << recipe << ": " << c.evidence;
  const CheckInfo* info = Registry::global().find_check(check);
  ASSERT_NE(info, nullptr);
  for (const auto& p : c.metrics.value("promises", nlohmann::json::array())) {
    const std::string id = p.value("id", "");
    bool timing = false;
    for (const PromiseInfo& pi : info->promises) timing = timing || (pi.id == id && pi.timing);
    if (!timing) {
      EXPECT_NE(p.value("status", ""), "broken") << check << " / " << recipe << ": " << id << ": " << c.evidence;
    }
  }
}

inline void expect_nothing_broken(const std::string& check, const std::string& recipe, RunFactory f) {
  expect_nothing_broken(run_one(check, recipe, std::move(f)), check, recipe);
}

}  // namespace tc::testing_recipes

// A correct recipe for the tests (see above): Type a default-constructible tc::Run subclass.
#define TC_TEST_RECIPE(Type, name, description)                                                   \
  static const bool TC_CONCAT(tc_test_recipe_, __LINE__) [[maybe_unused]] = ::tc::testing_recipes::add( \
      ::tc::RecipeInfo{name, description, {}, [] { return std::unique_ptr<::tc::Run>(new Type()); }, __FILE__, __LINE__, ""})
