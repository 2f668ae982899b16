// PythonRun as a tc::DistributedProvider (harness/contract/distributed_probe.h): the check
// `distributed` drives a Python recipe's DDP training under torchrun. make_distributed() asks
// torchconform._ddp for the recipe's DDP training (its make_distributed(), else a new instance of its
// class when it declares "ddp" in data_parallel_modes), and wraps it: each rank sets it up with
// RunOptions.data_parallel = "ddp" in Python's default process group (torchconform._fsdp.init, made
// from torchrun's environment), beside the check's own C++ group. What the check reads of a
// LibTorch recipe's model (bare_model(), training_loss(Module&)) a Python recipe answers in Python:
// DistributedModelProbe (one process's gradients, torchconform._ddp) and BareModelProbe (its
// checkpoint's model part in its bare model).
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "python/bridge/interpreter.h"
#include "python/bridge/python_run.h"

namespace py = pybind11;

namespace tc::python {

// Python's default process group, joined once for all the runs of one check, left (collectively)
// when the last of them and the provider are gone: a group left to the process's exit is torn
// down after Python stopped (torchconform/_fsdp.py, leave()).
struct __attribute__((visibility("hidden"))) PythonGroupLease {
  bool joined = false;
  void join(const std::string& device) {
    if (joined) return;
    py::gil_scoped_acquire gil;
    try {
      py::module_::import("torchconform._fsdp").attr("init")(device);
    } catch (py::error_already_set& e) {
      rethrow_python_error(e, "joining torchrun's process group (torchconform._fsdp.init)");
    }
    joined = true;
  }
  ~PythonGroupLease() {
    if (!joined) return;
    py::gil_scoped_acquire gil;
    try {
      py::module_::import("torchconform._fsdp").attr("leave")();
    } catch (py::error_already_set&) {  // a peer already gone: nothing left to tear down in order
    }
  }
};

namespace {

std::string device_text(const c10::Device& d) { return d.is_cuda() ? "cuda" : d.str(); }

// The gradients `parameters` hold now, by name, copied to the CPU (those without one left out).
NamedTensors gradients_of(const NamedTensors& parameters) {
  NamedTensors out;
  for (const auto& [name, p] : parameters) {
    if (p.grad().defined()) out.emplace_back(name, p.grad().detach().cpu().clone());
  }
  return out;
}

class PythonDistributed final : public DistributedRecipe, public DistributedModelProbe, public BareModelProbe {
 public:
  PythonDistributed(std::unique_ptr<PythonRun> run, std::shared_ptr<PythonGroupLease> lease)
      : run_(std::move(run)), lease_(std::move(lease)) {}

  ~PythonDistributed() override { run_.reset(); }  // before the lease may leave the group

  void setup(const DistRunOptions& o, ref::dist::ProcessGroup&) override {
    lease_->join(device_text(o.device));
    run_->set_data_parallel("ddp");
    // The gradients the update uses: where the recipe calls after_backward() (DDP has averaged
    // them by then), else what .grad holds after the step.
    run_->set_after_backward([this](const NamedTensors& parameters) {
      seen_gradients_ = gradients_of(parameters);
      gradients_seen_ = true;
    });
    RunOptions options;
    options.device = o.device;
    options.seed = o.seed;
    options.quick = o.quick;
    run_->setup(options);
    out_dir_ = o.out_dir;
  }

  int64_t steps_per_epoch() const override { return run_->steps_per_epoch(); }

  int64_t dataset_size() const override {
    py::gil_scoped_acquire gil;
    try {
      return py::module_::import("torchconform._ddp").attr("dataset_size")(run_->object()).cast<int64_t>();
    } catch (py::error_already_set& e) {
      rethrow_python_error(e, "dataset_size()");
    }
  }

  DistStep train_step() override {
    gradients_seen_ = false;
    const StepRecord r = run_->train_step();
    DistStep s;
    s.step = r.step;
    s.epoch = r.epoch;
    s.loss = r.loss;
    s.samples = run_->last_samples();
    if (!gradients_seen_) seen_gradients_ = gradients_of(run_->parameters());
    return s;
  }

  NamedTensors parameters() const override { return run_->parameters(); }
  NamedTensors last_gradients() const override { return seen_gradients_; }
  std::pair<at::Tensor, at::Tensor> last_batch() const override { return run_->last_batch(); }

  at::Tensor training_loss(torch::nn::Module&, const at::Tensor&, const at::Tensor&) override {
    throw ProbeNotProvided("a Python recipe's model is not a LibTorch module (one_process_gradients instead)");
  }
  std::shared_ptr<torch::nn::Module> bare_model() override {
    throw ProbeNotProvided("a Python recipe's model is not a LibTorch module (load_into_bare_model instead)");
  }

  OneProcessGradients one_process_gradients(const NamedTensors& parameters, const at::Tensor& x,
                                            const at::Tensor& y) override {
    const InMethod in("bare_model");
    py::gil_scoped_acquire gil;
    try {
      py::dict params;
      for (const auto& [name, t] : parameters) params[py::str(name)] = to_python(t);
      const py::tuple r = py::module_::import("torchconform._ddp")
                              .attr("one_process_gradients")(run_->object(), params, to_python(x), to_python(y))
                              .cast<py::tuple>();
      OneProcessGradients out;
      out.not_comparable = r[1].cast<std::string>();
      if (out.not_comparable.empty()) out.gradients = named_tensors_from_python(r[0], "one process's gradients");
      return out;
    } catch (py::error_already_set& e) {
      rethrow_python_error(e, "one process's gradients (bare_model(), training_loss())");
    }
  }

  BareModelLoad load_into_bare_model(const std::string& path) override { return run_->load_into_bare_model(path); }

  std::string save_checkpoint() override {
    const std::string path = out_dir_ + "/checkpoint.pt";
    run_->save_checkpoint(path);
    return path;
  }
  void load_checkpoint(const std::string& path) override { run_->load_checkpoint(path); }
  // A Python recipe writes no report of its own: its saves are what rank0_writes counts.
  std::string write_report() override { return ""; }

 private:
  std::unique_ptr<PythonRun> run_;
  std::shared_ptr<PythonGroupLease> lease_;
  std::string out_dir_;
  NamedTensors seen_gradients_;
  bool gradients_seen_ = false;
};

}  // namespace

std::unique_ptr<DistributedRecipe> PythonRun::make_distributed() const {
  py::object made;
  {
    const InMethod in("make_distributed");
    py::gil_scoped_acquire gil;
    try {
      const py::tuple r = py::module_::import("torchconform._ddp").attr("distributed_recipe")(instance_).cast<py::tuple>();
      if (r[0].is_none()) throw ProbeNotProvided(r[1].cast<std::string>());
      made = r[0];
    } catch (py::error_already_set& e) {
      rethrow_python_error(e, "make_distributed()");
    }
  }
  if (!ddp_group_) ddp_group_ = std::make_shared<PythonGroupLease>();
  std::unique_ptr<PythonRun> run;
  {
    py::gil_scoped_acquire gil;
    run = std::make_unique<PythonRun>(std::move(made));
    made = py::object();
  }
  return std::make_unique<PythonDistributed>(std::move(run), ddp_group_);
}

}  // namespace tc::python
