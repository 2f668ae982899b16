// PythonRun as a tc::AmpProbe (harness/contract/amp_probe.h): the checks amp and resume_equality
// (its fp16 pass) ask for mixed precision before setup(); setup() passes it to the recipe as
// RunOptions.amp (torchconform.AmpOptions), for a dtype the recipe lists in `amp_dtypes` (another
// one is ProbeNotProvided: the cell skips naming it). The recipe's train step calls
// Run.after_backward() right after backward, which calls the check's hook here; scaler_state() is
// its GradScaler's state_dict(); amp_step_on() hands the check's workload (a LibTorch module) to the
// recipe's own step as a Python callable and its live parameters: the same tensors, one autograd
// graph, autocast's dispatch state is the thread's whichever language set it.
#include <memory>
#include <stdexcept>
#include <string>

#include <torch/nn/module.h>

#include "python/bridge/interpreter.h"
#include "python/bridge/python_run.h"

namespace py = pybind11;

namespace tc::python {
namespace {

const char* amp_name(c10::ScalarType t) {
  return t == c10::kHalf ? "fp16" : t == c10::kBFloat16 ? "bf16" : "fp32";
}

}  // namespace

py::object PythonRun::amp_options() const {
  const GradScalerOptions& s = amp_.scaler;
  return py::module_::import("torchconform").attr("AmpOptions")(
      py::arg("dtype") = amp_name(amp_.dtype), py::arg("init_scale") = s.init_scale,
      py::arg("growth_factor") = s.growth_factor, py::arg("backoff_factor") = s.backoff_factor,
      py::arg("growth_interval") = s.growth_interval, py::arg("loss_weight") = amp_.loss_weight);
}

void PythonRun::set_amp(const AmpOptions& options) {
  if (options.dtype != c10::kFloat) {
    const std::string asked = amp_name(options.dtype);
    py::gil_scoped_acquire gil;
    bool declared = false;
    try {
      for (const py::handle d : instance_.attr("amp_dtypes")) declared = declared || d.cast<std::string>() == asked;
    } catch (py::error_already_set& e) {
      rethrow_python_error(e, "the recipe's amp_dtypes");
    } catch (const py::cast_error&) {
      throw std::runtime_error(method("amp_dtypes").substr(0, method("amp_dtypes").size() - 2) +
                               " holds a value that is not a str: a tuple of 'bf16' and/or 'fp16' is expected");
    }
    if (!declared) {
      throw ProbeNotProvided("the recipe does not list '" + asked + "' in amp_dtypes (torchconform.Run): its " +
                             asked + " mixed precision cannot be switched on from outside");
    }
  }
  amp_ = options;
}

void PythonRun::set_after_backward(std::function<void(const NamedTensors&)> hook) {
  after_backward_ = std::move(hook);
  py::gil_scoped_acquire gil;
  if (!after_backward_) {
    py::setattr(instance_, "_tc_after_backward", py::none());
    return;
  }
  // Reaches this object through `this`: the destructor sets the attribute back to None.
  py::setattr(instance_, "_tc_after_backward", py::cpp_function([this](const py::object& parameters) {
                if (!after_backward_) return;
                after_backward_(named_tensors_from_python(parameters, method("after_backward") + "'s parameters"));
              }));
}

std::optional<GradScalerState> PythonRun::scaler_state() const {
  const InMethod in("scaler_state");
  py::gil_scoped_acquire gil;
  try {
    const py::object r = bridge_module().attr("scaler_state")(instance_);
    if (r.is_none()) return std::nullopt;
    const py::tuple t = r.cast<py::tuple>();
    GradScalerState s;
    s.scale = t[0].cast<double>();
    s.growth_factor = t[1].cast<double>();
    s.backoff_factor = t[2].cast<double>();
    s.growth_interval = t[3].cast<int64_t>();
    s.growth_tracker = t[4].cast<int64_t>();
    return s;
  } catch (py::error_already_set& e) {
    rethrow_python_error(e, "scaler_state()");
  }
}

std::function<double()> PythonRun::amp_step_on(const AmpWorkload& workload) {
  if (!provides("amp_step_on")) return {};
  const InMethod in("amp_step_on");
  py::gil_scoped_acquire gil;
  try {
    const AmpWorkload w = workload;  // the module and its forward live as long as the step
    py::object forward = py::cpp_function([w](const py::object& x) {
      return to_python(w.forward(tensor_from_python(x, "the workload's input")));
    });
    py::dict parameters;
    for (const auto& p : w.model->named_parameters()) parameters[py::str(p.key())] = to_python(p.value());
    py::object step = instance_.attr("amp_step_on")(forward, parameters, to_python(w.input), to_python(w.target));
    if (!PyCallable_Check(step.ptr())) {
      throw std::runtime_error(method("amp_step_on") + " returned " +
                               std::string(py::str(py::type::handle_of(step).attr("__qualname__"))) +
                               ", not a function that trains one step");
    }
    // The Python function is dropped under the GIL, whichever thread drops the last copy.
    auto held = std::shared_ptr<py::object>(new py::object(std::move(step)), [](py::object* o) {
      py::gil_scoped_acquire g;
      delete o;
    });
    const std::string what = method("amp_step_on") + "'s step returned a value that";
    return [held, what] {
      const InMethod in("amp_step_on's step");
      py::gil_scoped_acquire g;
      try {
        return float_from_python((*held)(), what);
      } catch (py::error_already_set& e) {
        rethrow_python_error(e, "amp_step_on()'s step");
      }
    };
  } catch (py::error_already_set& e) {
    if (e.matches(PyExc_NotImplementedError)) return {};
    rethrow_python_error(e, "amp_step_on()");
  }
}

}  // namespace tc::python
