// PythonRun as a tc::DataParallelProbe (python/bridge/python_run_data_parallel.cpp), in one process
// (a world of one rank, Gloo): RunOptions.data_parallel reaches the recipe and shards it, the probe
// gathers whole parameters, counts what the rank holds, exchanges text, and leaves the group; a
// recipe that declares no data_parallel_modes is not provided (its cells skip).
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "harness/contract/data_parallel_probe.h"
#include "harness/contract/registry.h"
#include "python/bridge/loader.h"
#include "python/bridge/python_run.h"
#include "harness/testing/test_paths.h"

namespace py = pybind11;

namespace tc::python {
namespace {

const std::string kTests = std::string(tc::test_paths::source_dir()) + "/python/tests/";

std::unique_ptr<Run> make_run(Registry& reg, const std::string& spec) {
  const PythonRecipe r = load_python_recipe(kTests + spec, reg);
  return reg.find_recipe(r.name)->make();
}

TEST(PythonBridgeDataParallel, ARecipeWithoutDeclaredModesIsNotProvided) {
  Registry reg;
  std::unique_ptr<tc::Run> run = make_run(reg, "tiny_run.py:TinyRun");
  auto* probe = dynamic_cast<DataParallelProbe*>(run.get());
  ASSERT_NE(probe, nullptr);
  try {
    probe->set_data_parallel("fsdp");
    FAIL() << "set_data_parallel(\"fsdp\") accepted a recipe that declares no data_parallel_modes";
  } catch (const ProbeNotProvided& e) {
    EXPECT_NE(std::string(e.what()).find("data_parallel_modes"), std::string::npos) << e.what();
  }
  probe->set_data_parallel("");  // one process: always
}

TEST(PythonBridgeDataParallel, ShardsInAWorldOfOneAndGathersCountsAndLeaves) {
  Registry reg;
  std::unique_ptr<tc::Run> run = make_run(reg, "fsdp_mlp_run.py:FsdpMlpRun");
  // torchrun's environment for one rank (the port: this test's own, unlikely to be taken), where
  // Python reads it: os.environ, filled when the interpreter started (an earlier test started it).
  const std::vector<std::pair<std::string, std::string>> env = {
      {"RANK", "0"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "127.0.0.1"},
      {"MASTER_PORT", std::to_string(29500 + (getpid() % 2000))}};
  {
    py::gil_scoped_acquire gil;
    py::object environ = py::module_::import("os").attr("environ");
    for (const auto& [k, v] : env) environ[py::str(k)] = py::str(v);
  }
  auto* probe = dynamic_cast<DataParallelProbe*>(run.get());
  ASSERT_NE(probe, nullptr);
  const auto [rank, world] = probe->join_process_group("cpu");
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(world, 1);
  probe->set_data_parallel("fsdp");
  RunOptions o;
  o.seed = 5;
  run->setup(o);
  run->train_step();
  const ShardBytes b = probe->shard_bytes();
  EXPECT_EQ(b.parameters.tensors, 6);  // two Linear (weight, bias), the LayerNorm (weight, bias)
  EXPECT_EQ(b.parameters.local_bytes, b.parameters.full_bytes);  // one rank holds everything
  EXPECT_EQ(b.parameters.full_bytes, 4 * (12 * 7 + 7 + 7 + 7 + 7 * 3 + 3));
  EXPECT_EQ(b.gradients.tensors, 6);
  EXPECT_EQ(b.optimizer_state.tensors, 12);  // AdamW: two moments per parameter
  EXPECT_EQ(b.scalars, 6);                   // and a 0-dim step count each
  EXPECT_EQ(b.foreign_parameters.tensors, 0);
  EXPECT_TRUE(b.unsharded.empty());  // every parameter a DTensor
  const NamedTensors whole = probe->full_parameters();
  ASSERT_EQ(whole.size(), 6u);
  EXPECT_EQ(whole.front().first, "inp.weight");
  EXPECT_EQ(whole.front().second.sizes(), (std::vector<int64_t>{7, 12}));
  EXPECT_EQ(probe->all_gather_text("rank zero's record \xc3\xa9"), std::vector<std::string>{"rank zero's record \xc3\xa9"});
  probe->barrier();
  probe->leave_process_group();
  EXPECT_EQ(probe->join_process_group("cpu"), (std::pair<int, int>{0, 1}));  // a new group, made again
  probe->leave_process_group();
  py::gil_scoped_acquire gil;
  py::object environ = py::module_::import("os").attr("environ");
  for (const auto& [k, v] : env) environ.attr("pop")(py::str(k), py::none());
}

}  // namespace
}  // namespace tc::python
