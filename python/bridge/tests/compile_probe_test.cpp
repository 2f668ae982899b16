// PythonRun as a tc::CompileProbe (python/bridge/python_run_compile.cpp) on
// python/tests/tiny_compiled_run.py: RunOptions.compile reaches the recipe, and what TorchDynamo
// recorded comes back: frames compiled, the recompilation with the guard that failed, the graph
// break with the user's file:line; a C++ recipe is no CompileProbe.
#include <string>

#include <gtest/gtest.h>

#include "harness/contract/compile_probe.h"
#include "harness/contract/registry.h"
#include "python/bridge/interpreter.h"
#include "python/bridge/loader.h"
#include "python/bridge/python_run.h"
#include "harness/testing/test_paths.h"

namespace py = pybind11;

namespace tc::python {
namespace {

const std::string kFile = std::string(tc::test_paths::source_dir()) + "/python/tests/tiny_compiled_run.py";

std::unique_ptr<Run> make(Registry& reg) {
  const PythonRecipe r = load_python_recipe(kFile + ":TinyCompiledRun", reg);
  return reg.find_recipe(r.name)->make();
}

bool compile_asked(Run& run) {
  py::gil_scoped_acquire gil;
  return dynamic_cast<PythonRun&>(run).object().attr("compile_asked").cast<bool>();
}

TEST(PythonBridgeCompile, RecordsRecompilationsAndGraphBreaksSinceSetup) {
  Registry reg;
  std::unique_ptr<tc::Run> run = make(reg);
  auto* probe = dynamic_cast<CompileProbe*>(run.get());
  ASSERT_NE(probe, nullptr);
  RunOptions o;
  o.seed = 3;
  run->setup(o);
  EXPECT_FALSE(compile_asked(*run));  // off unless asked

  probe->set_compile(true);
  run->setup(o);
  EXPECT_TRUE(compile_asked(*run));
  for (int i = 0; i < 6; ++i) run->train_step();  // batch sizes 16, 16, 8, 16, 16, 8
  const CompileStats s = probe->compile_stats();
  EXPECT_GE(s.frames_compiled, 2);
  EXPECT_GE(s.graphs, 2);
  ASSERT_EQ(s.recompilations.size(), 1u);  // the half batch, once: then both shapes are cached
  EXPECT_NE(s.recompilations[0].function.find("forward_with_branch at " + kFile), std::string::npos)
      << s.recompilations[0].function;
  EXPECT_NE(s.recompilations[0].guard.find("size mismatch at index 0. expected 16, actual 8"), std::string::npos)
      << s.recompilations[0].guard;
  ASSERT_EQ(s.graph_breaks.size(), 1u);  // once, though each compiled shape met it
  EXPECT_EQ(s.graph_breaks[0].where, kFile + ":16");
  EXPECT_NE(s.graph_breaks[0].reason.find("data-dependent control flow"), std::string::npos) << s.graph_breaks[0].reason;

  // A fresh compiled setup starts the records afresh: the cached graphs are forgotten too, so the
  // first compilation is no recompilation.
  run->setup(o);
  run->train_step();
  const CompileStats fresh = probe->compile_stats();
  EXPECT_EQ(fresh.recompilations.size(), 0u);
  EXPECT_GE(fresh.frames_compiled, 1);
}

}  // namespace
}  // namespace tc::python
