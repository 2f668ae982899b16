// Registration of checks and recipes, with their attributes, in the builder style of Google
// Benchmark (`BENCHMARK(fn)->Arg(..)`). Included by every suite; no torch here.
//
// A check is a scenario generic over recipes: the check `my_check` is the function check_my_check,
// registered in the namespace it is declared in (or one enclosing it):
//
//   tc::CheckResult check_my_check(const tc::CheckContext& ctx) {
//     auto run = ctx.make_run();            // a fresh tc::Run of the recipe under test
//     ...
//   }
//   TC_CHECK(my_check, "what it promises")->Promise("bitwise", "two runs are bitwise equal")
//       ->Timeout(900);                     // ->MultiProcess(2) ->RunsAlone() ->CorrectRecipesOnly()
//
// A targeted variant counts as caught only when its cell breaks one of the check's promises
// (metrics.promises, status "broken"), or throws an error the check declares as its detection:
//
//   TC_CHECK(autograd_inplace, "...")->Promise("version_counter", "...")
//       ->DetectsByThrowing("version_counter", "modified by an inplace operation");
//
// A recipe is a tc::Run subclass (harness/contract/run.h). The suite's own correct recipe is a
// control (->Control()); a user's recipe registered without attributes is a subject under test.
// A broken variant names the checks that must catch it, and what it needs to be caught:
//
//   TC_RECIPE(ReferenceRecipe, "reference", "the correct recipe")->Control();
//   TC_RECIPE(NoSeed, "no_seed", "never calls seed_everything")->MustBeCaughtBy({"reproducibility"})
//       ->Breaks("reproducibility", {"same_seed_bitwise", "other_process_bitwise"});
//   TC_RECIPE(MixedDevices, "mixed_devices", "...")->MustBeCaughtBy({"device_agnostic"})->Needs("cuda");
//
// A variant names the promises it breaks by construction (->Breaks): its cell is caught only when
// one of them breaks (caught by another promise alone, the verdict is `missed`), and the teeth tests
// require exactly those broken, apart from timing promises (->TimingPromise: judged by a time
// measurement, so the machine's speed can break them too).
//
// The attributes are data: `torchconform list --json` exports them, and CTest's test generation,
// the teeth test and the HTML read them (never a check's name). Names are unique; a duplicate stops
// the program at start-up with both places named.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/contract/record.h"

namespace tc {

class Run;  // harness/contract/run.h
using RunFactory = std::function<std::unique_ptr<Run>()>;

// A multi-process cell's world: where this process stands among the ranks the launcher started
// (torchrun's RANK, WORLD_SIZE, LOCAL_WORLD_SIZE), set by the runner. size 0: not a multi-process cell.
struct World {
  int rank = 0;
  int size = 0;
  int local_size = 0;  // ranks on this host
  std::string label;   // what the cell's device reads, e.g. "cpu×2" (2 ranks on the CPU)

  bool one_host() const { return local_size == size; }
};

// What a check gets for one cell.
struct CheckContext {
  std::string check;
  std::string recipe;
  std::string device;   // "cpu" or "cuda"
  int64_t seed = 0;
  bool quick = false;
  bool cuda_present = false;  // the machine has a usable CUDA device (whatever the cell's device)
  bool recipe_is_variant = false;  // the recipe is a broken variant (it declares checks that catch it)
  Role role = Role::kReference;  // whose recipe: the suite's reference, a variant, a subject (record.h)
  bool sweep = false;  // `run --sweep`: costly sweeps a check runs for the reference only, for every recipe
  bool no_sweep = false;  // `run --no-sweep`: those sweeps for no recipe, the reference included
  Expected expected = Expected::kAny;  // what this cell is expected to give (pass, fail, any)
  RunFactory make_run;  // a fresh, not yet set-up run of the recipe under test
  // A multi-process check's worker: a directory every rank of this cell shares (same path).
  std::string work_dir;
  // Runs `part` of this cell's check in a fresh process of this program (same check, recipe, device
  // and seed; there ctx.part is `part`) and returns the metrics the check returned there: what a
  // process fixes once (a value read into a static, an address-derived key) differs between the two.
  // Set by the runner; empty where no process can be started.
  std::function<nlohmann::json(const std::string& part)> in_fresh_process;
  std::string part;  // not empty: this process was started by in_fresh_process, to run only `part`
  // What a process started again for this cell (in_fresh_process, a torchrun rank, a recipe's
  // process) must load to know its recipe, each as `--python SPEC`: the recipe's own
  // RecipeInfo::load_spec, nothing for a C++ recipe.
  std::vector<std::string> python_specs;
  World world;  // a multi-process check's ranks (size 0 otherwise)
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

// One promise of a check: a short id (what metrics.promises and the tests name) and its text.
struct PromiseInfo {
  std::string id;
  std::string text;
  // Judged by a time measurement (a throughput ratio, a share of waiting): its verdict follows from
  // the machine's speed as well as from the recipe, so a variant of another promise may break it
  // too where the machine makes it so (e.g. fp32 timed against bf16 on a CPU whose bf16 is fast).
  bool timing = false;
  // The most cells of the CPU matrix's judged tier (the reference on every check, each variant on
  // the checks it targets; ctest's quick tier) that may end this promise recorded, not judged:
  // pinned (->NotJudged), so that a change that judges less fails suites/not_judged_pins.py.
  // Timing promises are not pinned (a machine's speed decides them).
  int not_judged_cells = 0;
};

// An error a check declares as its detection: a cell of a variant it targets that throws an error
// whose message contains `message_contains` has broken `promise` (an id the check registered).
// Any other error of a targeted variant's cell is not a catch (verdict error).
struct ThrownDetection {
  std::string promise;
  std::string message_contains;
};

struct CheckInfo {
  std::string name;
  std::string promise;  // the whole promise in one line (list, README)
  CheckFn fn;
  std::string file;
  int line = 0;
  bool covers_variants = true;  // false: only correct recipes get a cell (no variant targets it)
  std::vector<PromiseInfo> promises;  // the promises one by one, as its evidence names them
  int ranks = 0;                // > 0: a multi-process check, launched under torchrun with this many
  bool runs_alone = false;      // measures time: nothing else may run beside it (CTest RUN_SERIAL)
  int timeout_s = 900;          // one cell's time limit in CTest
  std::string unsupported;      // not empty: cannot be checked from C++, the reason (cells skip)
  // A multi-process check: run in the launching process before torchrun starts; throws SkipCell
  // when the cell cannot run (e.g. the recipe lacks the probe), so nothing is launched for it.
  std::function<void(const CheckContext&)> preflight;
  std::vector<ThrownDetection> detects_by_throwing;  // errors that are its detection (see above)
  std::vector<std::pair<std::string, int>> not_judged_pins;  // ->NotJudged(id, cells), validated
  // The runner skips its cell when the recipe's training fails sanity (harness/contract/sanity.h):
  // every check but the one that judges sanity itself.
  bool sanity_precondition = true;
  // Not empty: the only languages ("c++", "python") whose recipes it can judge (->Languages); a
  // recipe in another gets no cell at all (not a skipped one), `languages_why` says why.
  std::vector<std::string> languages;
  std::string languages_why;

  bool multi_process() const { return ranks > 0; }
  // Whether a recipe written in `language` ("c++", "python"; RecipeInfo::language_name()) gets cells.
  bool judges_language(const std::string& language) const {
    return languages.empty() || std::find(languages.begin(), languages.end(), language) != languages.end();
  }
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
  // The suite's own correct recipe (->Control()): a control that must pass, so its failing cell is
  // the suite's false alarm. A correct recipe without it is a subject under test (a user's code).
  bool control = false;
  // The promises it breaks by construction, per targeted check (->Breaks). Where given for a check,
  // its cell there is caught only when one of them breaks.
  std::map<std::string, std::vector<std::string>> breaks;
  // "python" for a recipe loaded with `run --python` (harness/contract/python_loader.h); empty: C++.
  std::string language;
  // Its origin beyond file and line: for a Python recipe the `--python` spec that loads it alone in
  // another process ("/abs/file.py:Class", harness/contract/python_loader.h); empty for a C++
  // recipe, which every process of the binary has.
  std::string load_spec;

  bool is_variant() const { return !targets.empty(); }
  // Whether `check` must catch it (it is in ->Targets).
  bool targets_check(const std::string& check) const {
    return std::find(targets.begin(), targets.end(), check) != targets.end();
  }
  std::string language_name() const { return language.empty() ? "c++" : language; }
  // The promises of `check` it declares it breaks; null where it declares none there.
  const std::vector<std::string>* declared_breaks(const std::string& check) const {
    auto it = breaks.find(check);
    return it == breaks.end() ? nullptr : &it->second;
  }
  Role role() const { return is_variant() ? Role::kVariant : control ? Role::kReference : Role::kSubject; }
};

class Registry {
 public:
  static Registry& global();

  // Throw std::invalid_argument on an empty or duplicate name. TC_CHECK and TC_RECIPE call these
  // before main; add_recipe is also the runtime registration of a recipe loaded while the program
  // runs (a Python recipe: python/bridge/loader.h), which must happen before the run is planned.
  void add_check(CheckInfo info);
  void add_recipe(RecipeInfo info);

  const std::vector<CheckInfo>& checks() const { return checks_; }
  const std::vector<RecipeInfo>& recipes() const { return recipes_; }
  const CheckInfo* find_check(const std::string& name) const;
  const RecipeInfo* find_recipe(const std::string& name) const;
  CheckInfo* find_check(const std::string& name);
  RecipeInfo* find_recipe(const std::string& name);

  // A source of recipes named by a pattern rather than registered one by one (suites/generated:
  // "gen-17", a draw; "gen-17-drop_zero_grad", a mutant of it; "gen-1..20" and "gen-1..20-*", many):
  // given a name, the recipes it names, or an empty list when the name is not one of its own.
  // Sources run only through materialize().
  using RecipeSource = std::function<std::vector<RecipeInfo>(const std::string& name)>;
  void add_recipe_source(RecipeSource source);
  // Registers what a source makes of each of `names` that no registration holds (what `run
  // --recipe` and `list --recipe` ask for, in every process a run starts), and returns `names` with
  // each such name replaced by the names of the recipes it made. Unknown names are kept: the plan
  // reports them.
  std::vector<std::string> materialize(const std::vector<std::string>& names);

  // pass for a correct recipe, fail where a variant is targeted, any elsewhere.
  Expected expected(const std::string& check, const std::string& recipe) const;

  // Problems a registration cannot see alone: a variant targeting an unknown check or one that plans
  // no variant cells (CorrectRecipesOnly), a declared detection naming an unregistered promise.
  std::vector<std::string> validate() const;

 private:
  std::vector<CheckInfo> checks_;
  std::vector<RecipeInfo> recipes_;
  std::vector<RecipeSource> sources_;
};

// What TC_CHECK returns: sets the registered check's attributes, each call returning the builder.
class CheckBuilder {
 public:
  CheckBuilder(Registry& registry, std::string name) : registry_(&registry), name_(std::move(name)) {}
  // One promise: `id` as metrics.promises and the tests name it, `text` what it means.
  CheckBuilder* Promise(const std::string& id, const std::string& text = "");
  // A promise judged by a time measurement (see PromiseInfo::timing).
  CheckBuilder* TimingPromise(const std::string& id, const std::string& text = "");
  // How many cells of the CPU matrix's judged tier may end promise `id` not judged (each with its
  // reason in the evidence): PromiseInfo::not_judged_cells, 0 unless pinned here.
  CheckBuilder* NotJudged(const std::string& id, int cells);
  // Runs as `ranks` processes under torchrun (the runner launches them; the check is the worker).
  CheckBuilder* MultiProcess(int ranks = 2);
  // Measures time: runs with nothing beside it.
  CheckBuilder* RunsAlone();
  CheckBuilder* Timeout(int seconds);
  // Only correct recipes get a cell (no broken variant can target it).
  CheckBuilder* CorrectRecipesOnly();
  // A multi-process check's test in the launching process (see CheckInfo::preflight).
  CheckBuilder* Preflight(std::function<void(const CheckContext&)> fn);
  // An error whose message contains `message_contains` is this check catching a targeted variant
  // by breaking `promise` (see ThrownDetection).
  CheckBuilder* DetectsByThrowing(const std::string& promise, const std::string& message_contains);
  // Its cells run whatever sanity finds (the check judging sanity itself; see CheckInfo).
  CheckBuilder* NoSanityPrecondition();
  // It judges recipes written in these languages only ("c++", "python"): the matrix leaves the
  // others out, and `list` says `why` (see CheckInfo::languages).
  CheckBuilder* Languages(const std::vector<std::string>& languages, const std::string& why);

 private:
  CheckInfo& info();
  Registry* registry_;
  std::string name_;
};

// What TC_RECIPE returns.
class RecipeBuilder {
 public:
  RecipeBuilder(Registry& registry, std::string name) : registry_(&registry), name_(std::move(name)) {}
  // A broken variant: the checks that must catch it (a recipe with none is a correct one).
  RecipeBuilder* MustBeCaughtBy(const std::vector<std::string>& checks);
  // The promises of `check` (one it must be caught by) that it breaks by construction: its cell
  // there is caught only by one of these (see RecipeInfo::breaks).
  RecipeBuilder* Breaks(const std::string& check, const std::vector<std::string>& promises);
  // "cuda": the broken practice can only show where a CUDA device exists; elsewhere its targeted
  // cells are skipped with that reason.
  RecipeBuilder* Needs(const std::string& what);
  // The suite's own correct recipe, a control (see RecipeInfo::control); users' recipes omit it.
  RecipeBuilder* Control();

 private:
  RecipeInfo& info();
  Registry* registry_;
  std::string name_;
};

namespace detail {
// Registration runs before main: a mistake is a programmer error, reported with its place, and
// the program stops. The builders live as long as the program.
CheckBuilder* register_check(CheckInfo info);
RecipeBuilder* register_recipe(RecipeInfo info);
}  // namespace detail

}  // namespace tc

#define TC_CONCAT_INNER(a, b) a##b
#define TC_CONCAT(a, b) TC_CONCAT_INNER(a, b)

// Registers the check `name`: the function `tc::CheckResult check_<name>(const tc::CheckContext&)`
// in scope. Returns the CheckBuilder for its attributes.
#define TC_CHECK(name, promise)                                                                   \
  static ::tc::CheckBuilder* const TC_CONCAT(tc_check_, name) [[maybe_unused]] =                  \
      ::tc::detail::register_check(::tc::CheckInfo{#name, promise, TC_CONCAT(check_, name), __FILE__, __LINE__})

// A practice the seeds name that cannot be checked from C++: one skipped cell per correct recipe
// and device, with the reason, so it is never silently absent.
#define TC_UNSUPPORTED_CHECK(name, promise, reason)                                                \
  static ::tc::CheckBuilder* const TC_CONCAT(tc_check_, name) [[maybe_unused]] =                  \
      ::tc::detail::register_check(::tc::CheckInfo{                                               \
          #name, promise,                                                                         \
          [](const ::tc::CheckContext&) -> ::tc::CheckResult { throw ::tc::SkipCell(reason); },   \
          __FILE__, __LINE__, false, {}, 0, false, 900, reason, {}})

// Type: a default-constructible tc::Run subclass.
#define TC_RECIPE(Type, name, description)                                                        \
  static ::tc::RecipeBuilder* const TC_CONCAT(tc_recipe_, __LINE__) [[maybe_unused]] =            \
      ::tc::detail::register_recipe(::tc::RecipeInfo{                                             \
          name, description, {}, [] { return std::unique_ptr<::tc::Run>(new Type()); }, __FILE__, __LINE__, ""})
