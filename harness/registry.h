// Registration of checks and recipes. Included by every suite; no torch here.
//
// A check is a scenario generic over recipes:
//
//   tc::CheckResult my_check(const tc::CheckContext& ctx) {
//     auto run = ctx.make_run();            // a fresh tc::Run of the recipe under test
//     ...
//     return tc::CheckResult::fail("first divergence at step 3 ...", metrics);
//   }
//   TC_REGISTER_CHECK("my_check", "what it promises", my_check);
//
// A recipe is a tc::Run subclass (reference/run.h). A broken variant names the checks that must
// catch it:
//
//   TC_REGISTER_RECIPE(NoSeed, "no_seed", "never calls seed_everything", {"reproducibility"});
//
// Names are unique; a duplicate stops the program at start-up with both places named.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/record.h"

namespace tc {

class Run;  // reference/run.h
using RunFactory = std::function<std::unique_ptr<Run>()>;

// What a check gets for one cell.
struct CheckContext {
  std::string check;
  std::string recipe;
  std::string device;   // "cpu" or "cuda"
  int64_t seed = 0;
  bool quick = false;
  RunFactory make_run;  // a fresh, not yet set-up run of the recipe under test
};

// What a check returns: the practice held (pass) or not (fail), with the evidence.
struct CheckResult {
  Outcome outcome = Outcome::kNone;
  std::string evidence;
  nlohmann::json metrics = nlohmann::json::object();

  static CheckResult pass(std::string evidence, nlohmann::json metrics = nlohmann::json::object()) {
    return {Outcome::kPass, std::move(evidence), std::move(metrics)};
  }
  static CheckResult fail(std::string evidence, nlohmann::json metrics = nlohmann::json::object()) {
    return {Outcome::kFail, std::move(evidence), std::move(metrics)};
  }
};

// Thrown by a check when the harness itself cannot do its work (verdict `error`). Anything else a
// check lets escape is the recipe failing under test (outcome `fail`, the message is the evidence).
class HarnessError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown by a check when a cell cannot run here (verdict `skipped`, the message is the reason).
class SkipCell : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

using CheckFn = std::function<CheckResult(const CheckContext&)>;

struct CheckInfo {
  std::string name;
  std::string promise;
  CheckFn fn;
  std::string file;
  int line = 0;
  bool covers_variants = true;  // false: only correct recipes get a cell (no variant targets it)
};

struct RecipeInfo {
  std::string name;
  std::string description;
  std::vector<std::string> targets;  // checks that must catch it; empty: a correct recipe
  RunFactory make;
  std::string file;
  int line = 0;
  // "cuda": the broken practice can only show where a CUDA device exists (on a machine with one
  // device kind every tensor is on it); elsewhere its targeted cells are skipped with that reason.
  std::string needs;

  bool is_variant() const { return !targets.empty(); }
};

class Registry {
 public:
  static Registry& global();

  // Throw std::invalid_argument on an empty or duplicate name.
  void add_check(CheckInfo info);
  void add_recipe(RecipeInfo info);

  const std::vector<CheckInfo>& checks() const { return checks_; }
  const std::vector<RecipeInfo>& recipes() const { return recipes_; }
  const CheckInfo* find_check(const std::string& name) const;
  const RecipeInfo* find_recipe(const std::string& name) const;

  // pass for a correct recipe, fail where a variant is targeted, any elsewhere.
  Expected expected(const std::string& check, const std::string& recipe) const;

  // Problems a registration cannot see alone (a variant targeting an unknown check).
  std::vector<std::string> validate() const;

 private:
  std::vector<CheckInfo> checks_;
  std::vector<RecipeInfo> recipes_;
};

namespace detail {
struct CheckRegistrar {
  explicit CheckRegistrar(CheckInfo info);
};
struct RecipeRegistrar {
  explicit RecipeRegistrar(RecipeInfo info);
};
}  // namespace detail

}  // namespace tc

#define TC_CONCAT_INNER(a, b) a##b
#define TC_CONCAT(a, b) TC_CONCAT_INNER(a, b)

#define TC_REGISTER_CHECK(name, promise, fn)                                     \
  static const ::tc::detail::CheckRegistrar TC_CONCAT(tc_check_registrar_, __LINE__)( \
      ::tc::CheckInfo{name, promise, fn, __FILE__, __LINE__})

// A practice the seeds name that cannot be checked from C++: one skipped cell per correct recipe
// and device, with the reason, so it is never silently absent.
#define TC_REGISTER_UNSUPPORTED(name, promise, reason)                                  \
  static const ::tc::detail::CheckRegistrar TC_CONCAT(tc_check_registrar_, __LINE__)(   \
      ::tc::CheckInfo{name, promise,                                                    \
                      [](const ::tc::CheckContext&) -> ::tc::CheckResult { throw ::tc::SkipCell(reason); }, \
                      __FILE__, __LINE__, false})

// Type: a default-constructible tc::Run subclass. targets: {"check", ...}, {} for a correct recipe.
#define TC_REGISTER_RECIPE(Type, name, description, ...)                           \
  static const ::tc::detail::RecipeRegistrar TC_CONCAT(tc_recipe_registrar_, __LINE__)( \
      ::tc::RecipeInfo{name, description, std::vector<std::string> __VA_ARGS__,       \
                       [] { return std::unique_ptr<::tc::Run>(new Type()); }, __FILE__, __LINE__, ""})

// As TC_REGISTER_RECIPE, for a variant that can only be caught where `needs` ("cuda") exists.
#define TC_REGISTER_RECIPE_NEEDING(needs, Type, name, description, ...)                \
  static const ::tc::detail::RecipeRegistrar TC_CONCAT(tc_recipe_registrar_, __LINE__)( \
      ::tc::RecipeInfo{name, description, std::vector<std::string> __VA_ARGS__,       \
                       [] { return std::unique_ptr<::tc::Run>(new Type()); }, __FILE__, __LINE__, needs})
