#include "python/bridge/python_run.h"

#include <stdexcept>
#include <type_traits>

#include "harness/contract/costly_augment.h"
#include "harness/util/breadcrumb.h"
#include "python/bridge/interpreter.h"
#include "python/bridge/torch_python.h"

namespace py = pybind11;

namespace tc::python {
namespace {

std::string type_name(const py::handle& o) { return py::str(py::type::handle_of(o).attr("__qualname__")); }

template <class T>
const char* python_type() {
  if constexpr (std::is_same_v<T, bool>) return "a bool";
  else if constexpr (std::is_integral_v<T>) return "an int";
  else if constexpr (std::is_floating_point_v<T>) return "a float (or a one-element tensor)";
  else if constexpr (std::is_same_v<T, std::string>) return "a str";
  else return "another type";
}

// `value` as T, or an error in the recipe's terms: what returned it, the Python type it has, the
// one expected ("Tiny.train_step() returned a StepRecord whose loss is str ('0.7'): a float (or a
// one-element tensor) is expected").
template <class T>
T as(const py::handle& value, const std::string& what) {
  try {
    if constexpr (std::is_floating_point_v<T>) {
      if (torch_python::is_tensor(value.ptr())) return value.attr("item")().cast<T>();
    }
    return value.cast<T>();
  } catch (const py::cast_error&) {
    std::string shown = py::repr(value);
    if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
    throw std::runtime_error(what + " is " + type_name(value) + " (" + shown + "): " + python_type<T>() + " is expected");
  } catch (py::error_already_set& e) {
    throw std::runtime_error(what + " cannot be read as " + python_type<T>() + ": " + describe_python_error(e));
  }
}

// A field of a returned record: `fallback` where the object has no such attribute (a record
// written by hand may leave the optional ones out). `what` names the record ("Tiny.train_step()
// returned a StepRecord whose").
template <class T>
T field(const py::handle& record, const char* name, T fallback, const std::string& what) {
  if (!py::hasattr(record, name)) return fallback;
  return as<T>(record.attr(name), what + " " + name);
}

InitSpec::Kind init_kind(const std::string& kind) {
  if (kind == "normal") return InitSpec::Kind::kNormal;
  if (kind == "uniform") return InitSpec::Kind::kUniform;
  if (kind == "constant") return InitSpec::Kind::kConstant;
  if (kind == "truncated_normal") return InitSpec::Kind::kTruncatedNormal;
  throw std::runtime_error("declared_init() names the kind '" + kind +
                           "': one of normal, uniform, constant, truncated_normal");
}

}  // namespace

InMethod::InMethod(const char* name) { breadcrumb::enter(name); }
InMethod::~InMethod() { breadcrumb::leave(); }

double float_from_python(const py::handle& value, const std::string& what) { return as<double>(value, what); }

py::object to_python(const at::Tensor& t) {
  return py::reinterpret_steal<py::object>(torch_python::wrap(t));  // the same tensor, no copy
}

at::Tensor tensor_from_python(const py::handle& o, const std::string& what) {
  if (!torch_python::is_tensor(o.ptr())) {
    throw std::runtime_error(what + " returned " + type_name(o) + ", not a torch.Tensor");
  }
  return torch_python::unpack(o.ptr());
}

NamedTensors named_tensors_from_python(const py::handle& o, const std::string& what) {
  // A mapping (dict(model.named_parameters())) or any iterable of (name, tensor) pairs.
  if (!py::hasattr(o, "items") && !py::hasattr(o, "__iter__")) {
    throw std::runtime_error(what + " returned " + type_name(o) + ": a dict of name -> tensor (or (name, tensor) pairs) is expected");
  }
  py::object items = py::hasattr(o, "items") ? o.attr("items")() : py::reinterpret_borrow<py::object>(o);
  NamedTensors out;
  for (const py::handle item : py::iter(items)) {
    if (!py::isinstance<py::tuple>(item) && !py::isinstance<py::list>(item)) {
      throw std::runtime_error(what + " returned an item of type " + type_name(item) + ": (name, tensor) pairs are expected");
    }
    const py::sequence pair = py::reinterpret_borrow<py::sequence>(item);
    if (pair.size() != 2) throw std::runtime_error(what + " returned an item that is not a (name, tensor) pair");
    const std::string name = as<std::string>(pair[0], what + " returned a name that");
    out.emplace_back(name, tensor_from_python(pair[1], what + "['" + name + "']"));
  }
  return out;
}

PythonRun::PythonRun(py::object instance) : instance_(std::move(instance)) {
  try {
    for (const py::handle p : bridge_module().attr("provided_probes")(instance_)) probes_.insert(p.cast<std::string>());
  } catch (py::error_already_set& e) {
    rethrow_python_error(e, "the recipe's probes");
  }
}

std::vector<CheckOutlook> PythonRun::outlook(const std::vector<std::string>& checks, const std::string& device) const {
  py::gil_scoped_acquire gil;
  std::vector<CheckOutlook> out;
  try {
    py::object rows = py::module_::import("torchconform._outlook").attr("outlook")(instance_.attr("__class__"), checks, device);
    for (const py::handle row : rows) {
      const auto t = row.cast<py::tuple>();
      out.push_back({t[0].cast<std::string>(), t[1].cast<std::string>(), t[2].cast<std::string>()});
    }
  } catch (py::error_already_set& e) {
    rethrow_python_error(e, "the recipe's outlook");
  }
  return out;
}

PythonRun::~PythonRun() {
  end_compile();
  py::gil_scoped_acquire gil;
  if (after_backward_) {
    try {
      py::setattr(instance_, "_tc_after_backward", py::none());  // its function points at this object
    } catch (py::error_already_set&) {
    }
  }
  instance_ = py::object();  // the last reference may run Python (__del__, a DataLoader's workers)
}

template <class Invoke>
auto PythonRun::call(const char* name, Invoke invoke) const {
  const InMethod in(name);
  py::gil_scoped_acquire gil;
  try {
    return invoke(instance_.attr(name));
  } catch (py::error_already_set& e) {
    rethrow_python_error(e, std::string(name) + "()");
  } catch (const py::cast_error& e) {
    throw std::runtime_error(method(name) + " returned a value of the wrong type: " + e.what());
  }
}

std::string PythonRun::method(const char* name) const {
  py::gil_scoped_acquire gil;
  return type_name(instance_) + "." + name + "()";
}

template <class Absent, class Invoke>
auto PythonRun::probe(const char* name, Absent absent, Invoke invoke) const {
  if (!provides(name)) return absent();
  {
    const InMethod in(name);
    py::gil_scoped_acquire gil;
    try {
      return invoke(instance_.attr(name));
    } catch (py::error_already_set& e) {
      // An override that raises NotImplementedError declines, the same as not overriding it.
      if (!e.matches(PyExc_NotImplementedError)) rethrow_python_error(e, std::string(name) + "()");
    } catch (const py::cast_error& e) {
      throw std::runtime_error(method(name) + " returned a value of the wrong type: " + e.what());
    }
  }
  return absent();  // outside the GIL: tc::Run's default throws ProbeNotProvided
}

void PythonRun::setup(const RunOptions& options) {
  if (compile_) begin_compile();
  call("setup", [&](const py::object& f) {
    f(py::module_::import("torchconform").attr("RunOptions")(
        py::arg("device") = options.device.str(), py::arg("seed") = options.seed,
        py::arg("deterministic") = options.deterministic, py::arg("quick") = options.quick,
        py::arg("activation_checkpointing") = options.activation_checkpointing, py::arg("compile") = compile_,
        py::arg("data_parallel") = data_parallel_, py::arg("amp") = amp_options()));
    return 0;
  });
}

StepRecord PythonRun::train_step() {
  return call("train_step", [this](const py::object& f) {
    const py::object r = f();
    const std::string what = type_name(instance_) + ".train_step() returned a " + type_name(r) + " whose";
    if (!py::hasattr(r, "loss")) {
      throw std::runtime_error(type_name(instance_) + ".train_step() returned " + type_name(r) +
                               ", not a torchconform.StepRecord (no 'loss')");
    }
    StepRecord s;
    s.step = field<int64_t>(r, "step", s.step, what);
    s.epoch = field<int64_t>(r, "epoch", s.epoch, what);
    s.loss = as<double>(r.attr("loss"), what + " loss");
    s.lr = field<double>(r, "lr", s.lr, what);
    s.training_mode = field<bool>(r, "training_mode", s.training_mode, what);
    last_samples_.clear();
    if (py::hasattr(r, "samples") && !r.attr("samples").is_none()) {
      try {
        for (const py::handle i : r.attr("samples")) last_samples_.push_back(i.cast<int64_t>());
      } catch (const py::cast_error&) {
        throw std::runtime_error(what + " samples is not a sequence of int (the dataset indices of the batch)");
      }
    }
    return s;
  });
}

EvalResult PythonRun::evaluate() {
  return call("evaluate", [this](const py::object& f) {
    const py::object r = f();
    const std::string what = type_name(instance_) + ".evaluate() returned a " + type_name(r) + " whose";
    EvalResult e;
    e.loss = field<double>(r, "loss", e.loss, what);
    e.has_accuracy = py::hasattr(r, "accuracy") && !r.attr("accuracy").is_none();
    if (e.has_accuracy) e.accuracy = as<double>(r.attr("accuracy"), what + " accuracy");
    for (const char* name : {"logits", "outputs"}) {
      if (!e.logits.defined() && py::hasattr(r, name) && !r.attr(name).is_none()) {
        e.logits = tensor_from_python(r.attr(name), std::string("evaluate().") + name);
      }
    }
    return e;
  });
}

void PythonRun::save_checkpoint(const std::string& path) {
  call("save_checkpoint", [&](const py::object& f) {
    f(path);
    return 0;
  });
}

void PythonRun::load_checkpoint(const std::string& path) {
  call("load_checkpoint", [&](const py::object& f) {
    f(path);
    return 0;
  });
}

int64_t PythonRun::steps_per_epoch() const {
  return call("steps_per_epoch", [this](const py::object& f) {
    return as<int64_t>(f(), type_name(instance_) + ".steps_per_epoch()'s value");
  });
}

NamedTensors PythonRun::parameters() const {
  return call("parameters", [this](const py::object& f) {
    return named_tensors_from_python(f(), type_name(instance_) + ".parameters()");
  });
}

NamedTensors PythonRun::buffers() const {
  return call("buffers", [this](const py::object& f) {
    return named_tensors_from_python(f(), type_name(instance_) + ".buffers()");
  });
}

NamedTensors PythonRun::optimizer_state() const {
  return call("optimizer_state", [this](const py::object& f) {
    return named_tensors_from_python(f(), type_name(instance_) + ".optimizer_state()");
  });
}

at::Tensor PythonRun::example_input(int64_t batch) const {
  return probe("example_input", [&] { return Run::example_input(batch); },
               [&](const py::object& f) { return tensor_from_python(f(batch), "example_input()"); });
}

at::Tensor PythonRun::predict(const at::Tensor& x) {
  return probe("predict", [&] { return Run::predict(x); },
               [&](const py::object& f) { return tensor_from_python(f(to_python(x)), "predict()"); });
}

at::Tensor PythonRun::forward_train(const at::Tensor& x) {
  return probe("forward_train", [&] { return Run::forward_train(x); },
               [&](const py::object& f) { return tensor_from_python(f(to_python(x)), "forward_train()"); });
}

std::pair<at::Tensor, at::Tensor> PythonRun::last_batch() const {
  return probe("last_batch", [&] { return Run::last_batch(); }, [](const py::object& f) {
    const py::object r = f();
    const py::tuple pair = r.cast<py::tuple>();
    if (pair.size() != 2) throw std::runtime_error("last_batch() returned " + type_name(r) + ", not (inputs, targets)");
    return std::make_pair(tensor_from_python(pair[0], "last_batch()[0]"), tensor_from_python(pair[1], "last_batch()[1]"));
  });
}

at::Tensor PythonRun::training_loss(const at::Tensor& output, const at::Tensor& target) {
  return probe("training_loss", [&] { return Run::training_loss(output, target); }, [&](const py::object& f) {
    return tensor_from_python(f(to_python(output), to_python(target)), "training_loss()");
  });
}

double PythonRun::clip_norm() const {
  return probe("clip_norm", [&] { return Run::clip_norm(); },
               [this](const py::object& f) { return as<double>(f(), type_name(instance_) + ".clip_norm()'s value"); });
}

std::vector<InitSpec> PythonRun::declared_init() const {
  return probe("declared_init", [&] { return Run::declared_init(); }, [](const py::object& f) {
    std::vector<InitSpec> out;
    for (const py::handle s : py::iter(f())) {
      InitSpec spec;
      spec.parameter = s.attr("parameter").cast<std::string>();
      const std::string what = "declared_init() returned an InitSpec whose";
      spec.kind = init_kind(field<std::string>(s, "kind", "constant", what));
      spec.a = field<double>(s, "a", spec.a, what);
      spec.b = field<double>(s, "b", spec.b, what);
      spec.low = field<double>(s, "low", spec.low, what);
      spec.high = field<double>(s, "high", spec.high, what);
      out.push_back(spec);
    }
    return out;
  });
}

// These two answer with LibTorch objects (a torch::optim::Optimizer, a torch::nn::Module) that a
// Python recipe's torch.optim and torch.nn objects are not: a check needing them skips the cell.
torch::optim::Optimizer& PythonRun::optimizer() {
  throw ProbeNotProvided("the recipe does not provide optimizer(): a Python recipe's torch.optim optimizer "
                         "is not a LibTorch torch::optim::Optimizer");
}

std::shared_ptr<torch::nn::Module> PythonRun::bare_model() {
  throw ProbeNotProvided("the recipe does not provide bare_model(): a Python recipe's torch.nn.Module "
                         "is not a LibTorch torch::nn::Module");
}

bool PythonRun::does_activation_checkpointing() const {
  py::gil_scoped_acquire gil;
  const py::object v = py::getattr(instance_, "does_activation_checkpointing", py::bool_(false));
  return as<bool>(v, type_name(instance_) + ".does_activation_checkpointing");
}

std::string PythonRun::optimizer_algorithm() {
  return probe("optimizer", [&]() -> std::string { (void)Run::optimizer(); return {}; }, [&](const py::object&) {
    return bridge_module().attr("optimizer_algorithm")(instance_).cast<std::string>();
  });
}

std::vector<OptimizerGroupView> PythonRun::optimizer_groups() {
  return probe("optimizer", [&]() -> std::vector<OptimizerGroupView> { (void)Run::optimizer(); return {}; },
               [&](const py::object&) {
                 std::vector<OptimizerGroupView> out;
                 for (const py::handle g : bridge_module().attr("optimizer_groups")(instance_)) {
                   const py::tuple pair = py::reinterpret_borrow<py::object>(g).cast<py::tuple>();
                   OptimizerGroupView v;
                   for (const py::handle t : pair[0]) v.params.push_back(tensor_from_python(t, "optimizer().param_groups"));
                   v.lr = pair[1].cast<double>();
                   out.push_back(std::move(v));
                 }
                 return out;
               });
}

void PythonRun::optimizer_step() {
  probe("optimizer", [&] { (void)Run::optimizer(); return 0; }, [&](const py::object&) {
    bridge_module().attr("optimizer_step")(instance_);
    return 0;
  });
}

BareModelLoad PythonRun::load_into_bare_model(const std::string& path) {
  return probe("bare_model", [&]() -> BareModelLoad { (void)Run::bare_model(); return {}; }, [&](const py::object&) {
    const py::tuple r = bridge_module().attr("load_into_bare_model")(instance_, path).cast<py::tuple>();
    BareModelLoad out;
    const std::string outcome = r[0].cast<std::string>();
    out.outcome = outcome == "loaded"    ? BareModelLoad::Outcome::kLoaded
                  : outcome == "refused" ? BareModelLoad::Outcome::kRefused
                                         : BareModelLoad::Outcome::kUnknownFormat;
    if (out.outcome == BareModelLoad::Outcome::kLoaded) out.parameters = named_tensors_from_python(r[1], "bare_model()");
    out.detail = r[2].cast<std::string>();
    return out;
  });
}

// --- LoaderProbe -----------------------------------------------------------------------------------

DataWaitStats PythonRun::measure_data_wait(const LoaderProbeOptions& o) {
  const CostlyAugment* costly = o.extra_augment ? o.extra_augment.target<CostlyAugment>() : nullptr;
  if (o.extra_augment && costly == nullptr) {
    throw ProbeNotProvided("the check's extra augmentation is C++ code, which a Python recipe's DataLoader "
                           "workers (other processes) cannot run");
  }
  if (!o.device && (!provides("forward_train") || !provides("training_loss"))) {
    throw ProbeNotProvided("the real step on the device needs the recipe's forward_train() and training_loss() "
                           "(torchconform.Run), which it does not provide");
  }
  return probe("data_loader", [&]() -> DataWaitStats { throw ProbeNotProvided("the recipe does not provide data_loader()"); },
               [&](const py::object&) {
                 const py::dict r = py::module_::import("torchconform._loader").attr("measure_data_wait")(
                     instance_, o.loader ? py::object(py::int_(o.loader->workers)) : py::object(py::none()),
                     o.loader ? py::object(py::int_(o.loader->prefetch)) : py::object(py::none()), o.warmup_steps,
                     o.steps, costly ? costly->blur_rounds : 0,
                     costly ? std::chrono::duration<double>(costly->read_latency).count() : 0.0,
                     o.device ? py::object(py::float_(std::chrono::duration<double>(o.device->step_time()).count()))
                              : py::object(py::none()));
                 DataWaitStats st;
                 st.steps = r["steps"].cast<int64_t>();
                 st.warmup_steps = r["warmup_steps"].cast<int64_t>();
                 st.wall_s = r["wall_s"].cast<double>();
                 st.wait_s = r["wait_s"].cast<double>();
                 st.warmup_wait_s = r["warmup_wait_s"].cast<double>();
                 st.samples = r["samples"].cast<int64_t>();
                 return st;
               });
}

std::vector<at::Tensor> PythonRun::augmentations(int64_t epoch, int64_t batches) {
  return probe("data_loader",
               [&]() -> std::vector<at::Tensor> { throw ProbeNotProvided("the recipe does not provide data_loader()"); },
               [&](const py::object&) {
                 std::vector<at::Tensor> out;
                 for (const py::handle t :
                      py::module_::import("torchconform._loader").attr("worker_augmentations")(instance_, epoch, batches)) {
                   out.push_back(tensor_from_python(t, "data_loader() batch inputs"));
                 }
                 return out;
               });
}

std::vector<at::Tensor> PythonRun::worker_augmentations(int64_t batches) { return augmentations(0, batches); }

std::vector<at::Tensor> PythonRun::worker_augmentations_in_epoch(int64_t epoch, int64_t batches) {
  return augmentations(epoch, batches);
}

CopyTiming PythonRun::time_host_to_device_copy(int64_t bytes) {
  return probe("data_loader",
               [&]() -> CopyTiming { throw ProbeNotProvided("the recipe does not provide data_loader()"); },
               [&](const py::object&) {
                 const py::tuple r = py::module_::import("torchconform._loader").attr("time_copy")(instance_, bytes).cast<py::tuple>();
                 CopyTiming t;
                 t.call_s = r[0].cast<double>();
                 t.total_s = r[1].cast<double>();
                 t.pinned = r[2].cast<bool>();
                 return t;
               });
}

}  // namespace tc::python
