// PythonRun as a tc::CompileProbe (harness/contract/compile_probe.h): the check torch_compile asks
// for a compiled run before setup(); setup() then starts torch._dynamo's records afresh and passes
// RunOptions.compile = True to the recipe, which applies torch.compile the way it ships it;
// compile_stats() reads the records (python/torchconform/_compile.py).
#include <stdexcept>

#include "python/bridge/interpreter.h"
#include "python/bridge/python_run.h"

namespace py = pybind11;

namespace tc::python {
namespace {

py::module_ compile_module() { return py::module_::import("torchconform._compile"); }

}  // namespace

void PythonRun::set_compile(bool compile, const std::string& cache_dir) {
  compile_ = compile;
  compile_cache_dir_ = cache_dir;
}

void PythonRun::begin_compile() {
  py::gil_scoped_acquire gil;
  try {
    compile_module().attr("begin")(compile_cache_dir_);
    compile_begun_ = true;
  } catch (py::error_already_set& e) {
    rethrow_python_error(e, "starting torch.compile's records (torchconform._compile.begin)");
  }
}

void PythonRun::end_compile() noexcept {
  if (!compile_begun_) return;
  compile_begun_ = false;
  py::gil_scoped_acquire gil;
  try {
    compile_module().attr("end")();
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("torchconform._compile.end");
  } catch (...) {
  }
}

CompileStats PythonRun::compile_stats() {
  py::gil_scoped_acquire gil;
  try {
    const py::tuple r = compile_module().attr("stats")().cast<py::tuple>();
    CompileStats s;
    s.frames_compiled = r[0].cast<int64_t>();
    s.graphs = r[1].cast<int64_t>();
    for (const py::handle item : r[2]) {
      const py::tuple t = py::reinterpret_borrow<py::object>(item).cast<py::tuple>();
      s.recompilations.push_back({t[0].cast<std::string>(), t[1].cast<std::string>()});
    }
    for (const py::handle item : r[3]) {
      const py::tuple t = py::reinterpret_borrow<py::object>(item).cast<py::tuple>();
      s.graph_breaks.push_back({t[0].cast<std::string>(), t[1].cast<std::string>()});
    }
    return s;
  } catch (py::error_already_set& e) {
    rethrow_python_error(e, "reading torch.compile's records (torchconform._compile.stats)");
  }
}

}  // namespace tc::python
