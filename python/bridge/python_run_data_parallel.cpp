// PythonRun as a tc::DataParallelProbe (harness/contract/data_parallel_probe.h): the check fsdp asks
// for sharded or replicated training over torchrun's ranks before setup(); setup() passes
// RunOptions.data_parallel to the recipe, which shards (fully_shard) or wraps (DDP) its model the
// way it ships. The process group, the whole parameters, the bytes each rank holds and the check's
// exchanges between ranks are Python's (python/torchconform/_fsdp.py, torch.distributed's default
// group): the ranks need no second, C++ group beside the recipe's.
//
// A recipe declares the modes its setup() honours in `data_parallel_modes` (torchconform.Run):
// asking for another one is ProbeNotProvided, so the cell skips naming it.
#include <stdexcept>

#include "python/bridge/interpreter.h"
#include "python/bridge/python_run.h"

namespace py = pybind11;

namespace tc::python {
namespace {

py::module_ fsdp_module() { return py::module_::import("torchconform._fsdp"); }

ShardAccount account(const py::handle& v) {
  const py::list l = py::reinterpret_borrow<py::list>(v);
  return {l[0].cast<int64_t>(), l[1].cast<int64_t>(), l[2].cast<int64_t>(), l[3].cast<int64_t>()};
}

}  // namespace

std::pair<int, int> PythonRun::join_process_group(const std::string& device) {
  py::gil_scoped_acquire gil;
  try {
    const py::tuple r = fsdp_module().attr("init")(device).cast<py::tuple>();
    return {r[0].cast<int>(), r[1].cast<int>()};
  } catch (py::error_already_set& e) {
    rethrow_python_error(e, "joining torchrun's process group (torchconform._fsdp.init)");
  }
}

void PythonRun::set_data_parallel(const std::string& mode) {
  if (!mode.empty()) {
    py::gil_scoped_acquire gil;
    bool declared = false;
    try {
      for (const py::handle m : instance_.attr("data_parallel_modes")) declared = declared || m.cast<std::string>() == mode;
    } catch (py::error_already_set& e) {
      rethrow_python_error(e, "the recipe's data_parallel_modes");
    } catch (const py::cast_error&) {
      throw std::runtime_error("the recipe's data_parallel_modes is not a sequence of str");
    }
    if (!declared) {
      throw ProbeNotProvided("the Python recipe does not declare data_parallel_modes with \"" + mode +
                             "\" (its setup() would not train that way)");
    }
  }
  data_parallel_ = mode;
}

NamedTensors PythonRun::full_parameters() {
  py::gil_scoped_acquire gil;
  try {
    return named_tensors_from_python(fsdp_module().attr("full_parameters")(instance_), "full_parameters");
  } catch (py::error_already_set& e) {
    rethrow_python_error(e, "gathering the whole parameters (torchconform._fsdp.full_parameters)");
  }
}

ShardBytes PythonRun::shard_bytes() {
  py::gil_scoped_acquire gil;
  try {
    const py::dict d = fsdp_module().attr("shard_bytes")(instance_).cast<py::dict>();
    ShardBytes b;
    b.parameters = account(d["parameters"]);
    b.gradients = account(d["gradients"]);
    b.optimizer_state = account(d["optimizer_state"]);
    b.foreign_parameters = account(d["foreign_parameters"]);
    b.scalars = d["scalars"].cast<int64_t>();
    for (const py::handle n : d["unsharded"]) b.unsharded.push_back(n.cast<std::string>());
    return b;
  } catch (py::error_already_set& e) {
    rethrow_python_error(e, "counting what this rank holds (torchconform._fsdp.shard_bytes)");
  }
}

std::vector<std::string> PythonRun::all_gather_text(const std::string& text) {
  py::gil_scoped_acquire gil;
  try {
    std::vector<std::string> out;
    for (const py::handle t : fsdp_module().attr("all_gather_text")(text)) out.push_back(t.cast<std::string>());
    return out;
  } catch (py::error_already_set& e) {
    rethrow_python_error(e, "exchanging records between ranks (torchconform._fsdp.all_gather_text)");
  }
}

void PythonRun::barrier() {
  py::gil_scoped_acquire gil;
  try {
    fsdp_module().attr("barrier")();
  } catch (py::error_already_set& e) {
    rethrow_python_error(e, "a barrier of the ranks (torchconform._fsdp.barrier)");
  }
}

void PythonRun::leave_process_group() {
  py::gil_scoped_acquire gil;
  try {
    fsdp_module().attr("leave")();
  } catch (py::error_already_set& e) {
    rethrow_python_error(e, "leaving the process group (torchconform._fsdp.leave)");
  }
}

}  // namespace tc::python
