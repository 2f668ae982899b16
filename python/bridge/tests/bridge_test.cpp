// The Python bridge on python/tests/tiny_run.py: a Python recipe driven through tc::Run computes
// what the same Python does on its own, shares its tensors, reports its errors at the user's line,
// and lacks a probe the way a C++ recipe does.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <ATen/ATen.h>

#include "harness/contract/registry.h"
#include "harness/contract/run.h"
#include "harness/contract/scratch.h"
#include "python/bridge/interpreter.h"
#include "python/bridge/loader.h"
#include "python/bridge/python_run.h"
#include "harness/testing/test_paths.h"
#include "python/bridge/tests/end_of_process.h"
#include "harness/util/forking.h"

namespace py = pybind11;

namespace tc::python {
namespace {

const std::string kTiny = std::string(tc::test_paths::source_dir()) + "/python/tests/tiny_run.py";
constexpr int64_t kSeed = 7;
constexpr int kSteps = 6;  // more than one epoch of tiny_run's 4 batches: the wrap-around is covered

std::unique_ptr<Run> make(Registry& reg, const std::string& spec) {
  const PythonRecipe r = load_python_recipe(spec, reg);
  return reg.find_recipe(r.name)->make();
}

RunOptions options() {
  RunOptions o;
  o.seed = kSeed;
  return o;
}

// The message of what `fn` throws as E (empty when it throws nothing).
template <class E, class Fn>
std::string message_of(Fn fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

// A C++ recipe with no probe: what tc::Run's defaults say.
class BareRun : public Run {
 public:
  void setup(const RunOptions&) override {}
  StepRecord train_step() override { return {}; }
  EvalResult evaluate() override { return {}; }
  void save_checkpoint(const std::string&) override {}
  void load_checkpoint(const std::string&) override {}
  int64_t steps_per_epoch() const override { return 1; }
  NamedTensors parameters() const override { return {}; }
  NamedTensors buffers() const override { return {}; }
  NamedTensors optimizer_state() const override { return {}; }
};

TEST(PythonBridge, RegistersTheClassUnderItsSnakeCaseNameOrTheGivenOne) {
  Registry reg;
  const PythonRecipe r = load_python_recipe(kTiny + ":TinyRun", reg);
  EXPECT_EQ(r.name, "tiny_run");
  EXPECT_EQ(r.spec, kTiny + ":TinyRun");
  const RecipeInfo* info = reg.find_recipe("tiny_run");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->file, kTiny);
  EXPECT_GT(info->line, 0);
  EXPECT_EQ(info->role(), Role::kSubject);  // a user's recipe: a subject under test
  EXPECT_EQ(info->description, "A linear classifier trained with SGD (the bridge's tests).");
  EXPECT_EQ(load_python_recipe(kTiny + ":TinyRun=tiny_again", reg).name, "tiny_again");
  // A second registration under a taken name is refused, as for a C++ recipe.
  EXPECT_THROW(load_python_recipe(kTiny + ":TinyRun", reg), std::invalid_argument);
}

TEST(PythonBridge, AFileAloneRegistersEveryRecipeClassItDefinesInItsOrder) {
  Registry reg;
  const std::vector<PythonRecipe> all = load_python_recipes(kTiny, reg);
  std::vector<std::string> names;
  for (const PythonRecipe& r : all) names.push_back(r.name);
  EXPECT_EQ(names, (std::vector<std::string>{"tiny_run", "failing_run", "declared_variant"}));
  EXPECT_EQ(all[0].spec, kTiny + ":TinyRun");  // what a child process is given: one class each
  const RecipeInfo* variant = reg.find_recipe("declared_variant");
  ASSERT_NE(variant, nullptr);
  EXPECT_EQ(variant->role(), Role::kVariant);
  // A file that defines no recipe class (torchconform's own module imports Run, defines none).
  const std::string none = std::string(tc::test_paths::source_dir()) + "/python/torchconform/__init__.py";
  EXPECT_NE(message_of<std::invalid_argument>([&] { load_python_recipes(none, reg); })
                .find("defines no subclass of torchconform.Run"),
            std::string::npos);
}

TEST(PythonBridge, RefusesABadSpecWithASentence) {
  Registry reg;
  EXPECT_NE(message_of<std::invalid_argument>([&] { load_python_recipe("no_colon.py", reg); }).find("is not FILE.py:CLASS"),
            std::string::npos);
  EXPECT_NE(message_of<std::invalid_argument>([&] { load_python_recipe(kTiny + ":Nope", reg); }).find("'Nope' in"),
            std::string::npos);
  EXPECT_NE(message_of<std::invalid_argument>([&] { load_python_recipe("/nonexistent/x.py:X", reg); })
                .find("no such Python file"),
            std::string::npos);
  EXPECT_TRUE(reg.recipes().empty());
}

// The line of `file` holding `marker` (0: none).
int line_of(const std::string& file, const std::string& marker) {
  std::ifstream in(file);
  std::string text;
  for (int n = 1; std::getline(in, text); ++n) {
    if (text.find(marker) != std::string::npos) return n;
  }
  return 0;
}

TEST(PythonBridge, AnErrorWhileImportingTheFileNamesItsLine) {
  const std::string file = std::string(tc::test_paths::source_dir()) + "/python/tests/broken_at_import.py";
  const int line = line_of(file, "raise RuntimeError(\"broken at import\")");
  ASSERT_GT(line, 0);
  Registry reg;
  const std::string msg = message_of<std::invalid_argument>([&] { load_python_recipe(file + ":NeverRun", reg); });
  EXPECT_NE(msg.find("RuntimeError: broken at import"), std::string::npos) << msg;
  EXPECT_NE(msg.find(file + ":" + std::to_string(line)), std::string::npos) << msg;
  EXPECT_TRUE(reg.recipes().empty());
}

TEST(PythonBridge, TrainStepLossesEqualThePythonLoopBitwise) {
  Registry reg;
  auto run = make(reg, kTiny + ":TinyRun");
  run->setup(options());
  std::vector<double> through_bridge;
  for (int i = 0; i < kSteps; ++i) {
    const StepRecord s = run->train_step();
    EXPECT_EQ(s.step, i);
    EXPECT_TRUE(s.training_mode);
    through_bridge.push_back(s.loss);
  }
  std::vector<double> plain;
  {
    py::gil_scoped_acquire gil;
    plain = py::module_::import("tiny_run").attr("plain_losses")(kSeed, kSteps).cast<std::vector<double>>();
  }
  ASSERT_EQ(through_bridge.size(), plain.size());
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(through_bridge[i], plain[i]) << "step " << i;
  EXPECT_EQ(run->steps_per_epoch(), 4);
}

TEST(PythonBridge, ParametersAreThePythonModulesTensorsWithoutACopy) {
  Registry reg;
  auto run = make(reg, kTiny + ":TinyRun");
  run->setup(options());
  const NamedTensors params = run->parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].first, "weight");
  EXPECT_EQ(params[1].first, "bias");
  const auto* python_run = dynamic_cast<PythonRun*>(run.get());
  ASSERT_NE(python_run, nullptr);
  int64_t python_ptr = 0;
  {
    py::gil_scoped_acquire gil;
    python_ptr = python_run->object().attr("model").attr("weight").attr("data_ptr")().cast<int64_t>();
  }
  EXPECT_EQ(reinterpret_cast<int64_t>(params[0].second.data_ptr()), python_ptr);
  // One tensor: a change made from C++ is what Python reads.
  {
    at::NoGradGuard no_grad;
    params[1].second.fill_(0.25);
  }
  py::gil_scoped_acquire gil;
  EXPECT_EQ(python_run->object().attr("model").attr("bias").attr("sum")().attr("item")().cast<double>(),
            0.25 * static_cast<double>(params[1].second.numel()));
}

TEST(PythonBridge, APythonExceptionNamesTheUsersFileAndLine) {
  const int line = line_of(kTiny, "raise ValueError(\"the step fell over\")");
  ASSERT_GT(line, 0);
  Registry reg;
  auto run = make(reg, kTiny + ":FailingRun");
  run->setup(options());
  const std::string msg = message_of<std::runtime_error>([&] { run->train_step(); });
  EXPECT_NE(msg.find("train_step() raised ValueError: the step fell over"), std::string::npos) << msg;
  EXPECT_NE(msg.find(kTiny + ":" + std::to_string(line) + " in helper"), std::string::npos) << msg;
  EXPECT_NE(msg.find(" in train_step"), std::string::npos) << msg;  // and what called it
}

TEST(PythonBridge, AMissingProbeIsWhatTheCppBaseSays) {
  Registry reg;
  auto run = make(reg, kTiny + ":TinyRun");
  run->setup(options());
  BareRun bare;
  const at::Tensor x = run->example_input(2);  // provided by TinyRun
  EXPECT_EQ(x.size(0), 2);
  const std::string python = message_of<ProbeNotProvided>([&] { run->predict(x); });
  EXPECT_FALSE(python.empty());
  EXPECT_EQ(python, message_of<ProbeNotProvided>([&] { bare.predict(x); }));
  EXPECT_EQ(message_of<ProbeNotProvided>([&] { run->clip_norm(); }),
            message_of<ProbeNotProvided>([&] { bare.clip_norm(); }));
  EXPECT_EQ(message_of<ProbeNotProvided>([&] { run->declared_init(); }),
            message_of<ProbeNotProvided>([&] { bare.declared_init(); }));
  EXPECT_FALSE(message_of<ProbeNotProvided>([&] { run->optimizer(); }).empty());
  EXPECT_FALSE(message_of<ProbeNotProvided>([&] { run->bare_model(); }).empty());
}

TEST(PythonBridge, ACheckpointResumesTheRunAndEvaluateGivesItsLogits) {
  Registry reg;
  auto a = make(reg, kTiny + ":TinyRun");
  a->setup(options());
  a->train_step();
  const Scratch scratch("tc-bridge-test-");
  const std::string path = scratch.file("tiny_run_checkpoint.pt");
  a->save_checkpoint(path);
  const double next = a->train_step().loss;
  auto b = reg.find_recipe("tiny_run")->make();
  b->setup(options());
  b->load_checkpoint(path);
  EXPECT_EQ(b->train_step().loss, next);
  const EvalResult e = b->evaluate();
  ASSERT_TRUE(e.logits.defined());
  EXPECT_EQ(e.logits.dim(), 2);
  EXPECT_GE(e.accuracy, 0.0);
  EXPECT_LE(e.accuracy, 1.0);
}

TEST(PythonBridge, TheGilIsHeldOnlyInsideACall) {
  Registry reg;
  auto run = make(reg, kTiny + ":TinyRun");
  run->setup(options());
  // Another thread gets through: this one holds no GIL between calls.
  double loss = 0.0;
  std::thread other([&] { loss = run->train_step().loss; });
  other.join();
  EXPECT_GT(loss, 0.0);
  EXPECT_EQ(PyGILState_Check(), 0);
}

// A recipe's DataLoader workers started by a fork server that preloads torch (the Python reference's
// worker_context()) start with torch imported: the server imports it on this process's sys.path, the
// venv's site-packages included. CPython 3.11's server imported its preload on the bare interpreter's
// path, failed silently, and every worker imported torch anew (about 1 s each, measured).
TEST(PythonBridge, AForkServersWorkersStartWithItsPreloadImported) {
  Registry reg;
  make(reg, kTiny + ":TinyRun");  // starts the interpreter
  py::gil_scoped_acquire gil;
  py::dict scope;
  scope["tests_dir"] = std::string(tc::test_paths::source_dir()) + "/python/tests";
  py::exec(R"PY(
import multiprocessing, sys
if tests_dir not in sys.path:
    sys.path.insert(0, tests_dir)
import forkserver_probe
ctx = multiprocessing.get_context("forkserver")
ctx.set_forkserver_preload(["torch"])
queue = ctx.Queue()
worker = ctx.Process(target=forkserver_probe.preloaded, args=(["torch"], queue))
worker.start()
seen = queue.get(timeout=120)
worker.join()
)PY",
           scope);
  EXPECT_TRUE(scope["seen"]["torch"].cast<bool>()) << "a fork server's worker started without torch imported";
}

// A recipe's process (a fork between the bridge's hooks, as harness/recipe_process.cpp makes it)
// gets its DataLoader's fork server from the template it forked before its first cell
// (forking::recipe_process_start, as run_cells calls it; python/torchconform/_forkserver.py), as a
// new interpreter would have started it: the preload
// imported, no descriptor of its parent but those multiprocessing passes (a pipe the forking process
// held is closed), the environment as the process has it when the server starts (a variable given
// after the fork, as run_body_in_child gives its own), the process's group. A second server (the
// first one killed) starts as a new interpreter and works too. Its own suite, so its own process:
// one thread at the fork.
TEST(PythonBridgeForkServer, ARecipeProcessesServerIsItsTemplateStartedAsANewInterpreterWouldBe) {
  Registry reg;
  make(reg, kTiny + ":TinyRun");  // starts the interpreter and registers the fork hooks
  ASSERT_TRUE(forking::single_threaded());
  int inherited[2];
  ASSERT_EQ(pipe(inherited), 0);
  struct stat st {};
  ASSERT_EQ(fstat(inherited[0], &st), 0);
  const pid_t pid = forking::fork_with_hooks();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setpgid(0, 0);
    forking::recipe_process_start();
    setenv("TC_TEMPLATE_PROBE", "given after the template", 1);
    int rc = 3;
    std::string pymp;
    {
      py::gil_scoped_acquire gil;
      try {
        py::dict scope;
        scope["tests_dir"] = std::string(tc::test_paths::source_dir()) + "/python/tests";
        scope["fd"] = inherited[0];
        scope["inode"] = static_cast<long long>(st.st_ino);
        py::exec(R"PY(
import multiprocessing, os, sys, time
import multiprocessing.forkserver as forkserver
import torchconform._forkserver as template
if tests_dir not in sys.path:
    sys.path.insert(0, tests_dir)
import forkserver_probe
problems = []
made = template.template_pid()
ctx = multiprocessing.get_context("forkserver")
ctx.set_forkserver_preload(["torch"])
queue = ctx.Queue()
def seen_by_a_worker():
    worker = ctx.Process(target=forkserver_probe.started_with, args=(["torch"], fd, inode, "TC_TEMPLATE_PROBE", queue))
    worker.start()
    seen = queue.get(timeout=120)
    worker.join()
    return seen
def check(seen, which):
    if not seen["preloaded"]["torch"]: problems.append(which + ": the worker started without torch imported")
    if seen["inherited_pipe"]: problems.append(which + ": the worker holds a pipe its server's parent held")
    if seen["env"] != "given after the template": problems.append(which + ": TC_TEMPLATE_PROBE is %r" % seen["env"])
    if seen["pgid"] != os.getpgid(0): problems.append(which + ": the worker is in group %d" % seen["pgid"])
check(seen_by_a_worker(), "first server")
if made is None or forkserver._forkserver._forkserver_pid != made:
    problems.append("the server (%r) is not the template (%r)" % (forkserver._forkserver._forkserver_pid, made))
os.kill(forkserver._forkserver._forkserver_pid, 9)
time.sleep(0.5)
check(seen_by_a_worker(), "second server")
if forkserver._forkserver._forkserver_pid == made:
    problems.append("the second server is the template again")
queue.close()
queue.join_thread()
pymp = multiprocessing.util.get_temp_dir()  # the servers' sockets: this process's own (pymp-*)
for p in problems:
    print(p, file=sys.stderr)
rc = 1 if problems else 0
)PY",
                 scope);
        rc = scope["rc"].cast<int>();
        pymp = scope["pymp"].cast<std::string>();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
      }
    }
    // As the recipe's process ends (before _exit, which skips multiprocessing's exit handler): its
    // temporary directory is removed.
    forking::recipe_process_end();
    if (rc == 0 && (pymp.empty() || access(pymp.c_str(), F_OK) == 0)) {
      std::fprintf(stderr, "multiprocessing's directory '%s' is still there after recipe_process_end\n", pymp.c_str());
      rc = 4;
    }
    std::fflush(nullptr);
    _exit(rc);
  }
  close(inherited[0]);
  close(inherited[1]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the recipe's process found the problems it printed above (3: it failed, "
                                        "4: its multiprocessing directory outlived recipe_process_end)";
}

// The process that forks the recipes' processes imports, once, what torch imports lazily on a
// recipe's first calls (torch._inductor.config: torch.use_deterministic_algorithms, torch.compile),
// so that each fork has it (forking::warm_up; about a second of CPU a recipe's process spent), and
// keeps its threads as they were (a fork needs one). Its own suite, so its own process: nothing
// before it imported the module. Python's collector skips these imports and runs again after them.
TEST(PythonBridgeWarmUp, ImportsWhatARecipesFirstCallsImportAndStartsNoThread) {
  Registry reg;
  make(reg, kTiny + ":TinyRun");  // starts the interpreter
  auto threads = [] {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) n += e.is_directory() ? 1 : 0;
    return n;
  };
  auto imported = [] {
    py::gil_scoped_acquire gil;
    return py::module_::import("sys").attr("modules").contains("torch._inductor.config");
  };
  // The collector: running again after the imports, which it skipped (interpreter.cpp,
  // ImportsUncollected); what torch's import made frozen (a fresh interpreter has nothing frozen).
  auto collector = [] {
    py::gil_scoped_acquire gil;
    py::module_ gc = py::module_::import("gc");
    return std::make_pair(gc.attr("isenabled")().cast<bool>(), gc.attr("get_freeze_count")().cast<int64_t>());
  };
  const auto [enabled_at_start, frozen_at_start] = collector();
  EXPECT_TRUE(enabled_at_start) << "the collector stayed off after the interpreter's start";
  EXPECT_GT(frozen_at_start, 0) << "torch's objects were not frozen after its import";
  ASSERT_FALSE(imported()) << "imported before the warm-up: this test proves nothing";
  const int before = threads();
  forking::warm_up();
  EXPECT_TRUE(imported());
  EXPECT_EQ(threads(), before);
  const auto [enabled_after_warm_up, frozen_after_warm_up] = collector();
  EXPECT_TRUE(enabled_after_warm_up) << "the collector stayed off after the warm-up";
  EXPECT_GT(frozen_after_warm_up, frozen_at_start) << "the warm-up's imports were not frozen";
  forking::warm_up();  // once per process: a second call does nothing
  EXPECT_EQ(threads(), before);
}

}  // namespace
}  // namespace tc::python
