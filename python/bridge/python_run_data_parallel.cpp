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
#include <string>
#include <utility>
#include <vector>

#include "python/bridge/interpreter.h"
#include "python/bridge/python_run.h"

namespace py = pybind11;

namespace tc::python {
namespace {

// With the GIL held: invoke(torchconform._fsdp.<name>), which makes the arguments, calls and
// converts the result. A Python exception becomes rethrow_python_error's runtime_error naming
// `what`; a result of the wrong type a runtime_error naming the function.
template <class Invoke>
auto call_fsdp(const char* name, const char* what, Invoke invoke) {
  py::gil_scoped_acquire gil;
  try {
    return invoke(py::module_::import("torchconform._fsdp").attr(name));
  } catch (py::error_already_set& e) {
    rethrow_python_error(e, std::string(what) + " (torchconform._fsdp." + name + ")");
  } catch (const py::cast_error& e) {
    throw std::runtime_error(std::string("torchconform._fsdp.") + name + " returned a value of the wrong type: " + e.what());
  }
}

ShardAccount account(const py::handle& v) {
  const py::list l = py::reinterpret_borrow<py::list>(v);
  return {l[0].cast<int64_t>(), l[1].cast<int64_t>(), l[2].cast<int64_t>(), l[3].cast<int64_t>()};
}

}  // namespace

std::pair<int, int> PythonRun::join_process_group(const std::string& device) {
  return call_fsdp("init", "joining torchrun's process group", [&](const py::object& f) {
    const py::tuple r = f(device).cast<py::tuple>();
    return std::pair<int, int>{r[0].cast<int>(), r[1].cast<int>()};
  });
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
  return call_fsdp("full_parameters", "gathering the whole parameters", [&](const py::object& f) {
    return named_tensors_from_python(f(instance_), "full_parameters");
  });
}

ShardBytes PythonRun::shard_bytes() {
  return call_fsdp("shard_bytes", "counting what this rank holds", [&](const py::object& f) {
    const py::dict d = f(instance_).cast<py::dict>();
    ShardBytes b;
    b.parameters = account(d["parameters"]);
    b.gradients = account(d["gradients"]);
    b.optimizer_state = account(d["optimizer_state"]);
    b.foreign_parameters = account(d["foreign_parameters"]);
    b.scalars = d["scalars"].cast<int64_t>();
    for (const py::handle n : d["unsharded"]) b.unsharded.push_back(n.cast<std::string>());
    return b;
  });
}

std::vector<std::string> PythonRun::all_gather_text(const std::string& text) {
  return call_fsdp("all_gather_text", "exchanging records between ranks", [&](const py::object& f) {
    std::vector<std::string> out;
    for (const py::handle t : f(text)) out.push_back(t.cast<std::string>());
    return out;
  });
}

void PythonRun::barrier() {
  call_fsdp("barrier", "a barrier of the ranks", [](const py::object& f) { f(); });
}

void PythonRun::leave_process_group() {
  call_fsdp("leave", "leaving the process group", [](const py::object& f) { f(); });
}

}  // namespace tc::python
