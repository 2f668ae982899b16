// A Python recipe as a tc::Run: every call goes to the Python object (a torchconform.Run), under
// the GIL for that call only. Tensors cross without copies (THPVariable_Wrap / THPVariable_Unpack:
// the same at::Tensor, one autograd graph); what parameters() returns are the module's live
// tensors. A Python exception becomes std::runtime_error naming the call, the exception and the
// user's innermost frames (interpreter.h), so the cell's evidence points at the user's file:line.
//
// Optional probes: one the Python class does not override, or whose override raises
// NotImplementedError, is what tc::Run's default does (ProbeNotProvided, the same message), so a
// check that needs it skips the cell with the same reason as for a C++ recipe. optimizer() and
// bare_model() answer with a LibTorch object a Python recipe cannot give: always not provided; the
// checks reach a Python recipe's optimizer and bare model through the language-neutral probes
// (harness/contract/state_probes.h) instead, which call the recipe's optimizer() and bare_model().
#pragma once

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "harness/contract/amp_probe.h"
#include "harness/contract/compile_probe.h"
#include "harness/contract/data_parallel_probe.h"
#include "harness/contract/distributed_probe.h"
#include "harness/contract/loader_probe.h"
#include "harness/contract/recipe_outlook.h"
#include "harness/contract/run.h"
#include "harness/contract/state_probes.h"
#include "python/bridge/pybind.h"

namespace tc::python {

struct PythonGroupLease;  // python_run_distributed.cpp

// Hidden like pybind11's own types (its namespace is hidden): it holds a pybind11::object.
class __attribute__((visibility("hidden"))) PythonRun : public Run,
                                                          public OptimizerProbe,
                                                          public BareModelProbe,
                                                          public LoaderProbe,
                                                          public CompileProbe,
                                                          public DataParallelProbe,
                                                          public AmpProbe,
                                                          public DistributedProvider,
                                                          public RecipeOutlook {
 public:
  // `instance`: a torchconform.Run (the caller holds the GIL).
  explicit PythonRun(pybind11::object instance);
  ~PythonRun() override;

  // RecipeOutlook: torchconform._outlook on the class (nothing runs).
  std::vector<CheckOutlook> outlook(const std::vector<std::string>& checks, const std::string& device) const override;
  PythonRun(const PythonRun&) = delete;
  PythonRun& operator=(const PythonRun&) = delete;

  void setup(const RunOptions& options) override;
  StepRecord train_step() override;
  EvalResult evaluate() override;
  void save_checkpoint(const std::string& path) override;
  void load_checkpoint(const std::string& path) override;
  int64_t steps_per_epoch() const override;
  NamedTensors parameters() const override;
  NamedTensors buffers() const override;
  NamedTensors optimizer_state() const override;

  at::Tensor example_input(int64_t batch) const override;
  at::Tensor predict(const at::Tensor& x) override;
  at::Tensor forward_train(const at::Tensor& x) override;
  std::pair<at::Tensor, at::Tensor> last_batch() const override;
  at::Tensor training_loss(const at::Tensor& output, const at::Tensor& target) override;
  torch::optim::Optimizer& optimizer() override;
  double clip_norm() const override;
  std::vector<InitSpec> declared_init() const override;
  std::shared_ptr<torch::nn::Module> bare_model() override;
  // The class attribute does_activation_checkpointing (torchconform.Run: False).
  bool does_activation_checkpointing() const override;

  // OptimizerProbe: the recipe's optimizer() (a torch.optim.Optimizer); ProbeNotProvided without it.
  std::string optimizer_algorithm() override;
  std::vector<OptimizerGroupView> optimizer_groups() override;
  void optimizer_step() override;
  // BareModelProbe: the recipe's bare_model() and model_state_of(path) (torchconform.Run's
  // default: torch.load with weights_only=True); ProbeNotProvided without bare_model().
  BareModelLoad load_into_bare_model(const std::string& path) override;

  // LoaderProbe: the recipe's data_loader() measured and sampled in Python
  // (torchconform/_loader.py), its DataLoader's workers making the batches; ProbeNotProvided
  // without data_loader(). The check's extra work reaches the workers as a CostlyAugment's
  // parameters. On CUDA the real step (the recipe's forward_train, training_loss and optimizer on its
  // device) and the copy of a host tensor pinned as its loader pins (torchconform/_loader.py).
  DataWaitStats measure_data_wait(const LoaderProbeOptions& options) override;
  std::vector<at::Tensor> worker_augmentations(int64_t batches) override;
  std::vector<at::Tensor> worker_augmentations_in_epoch(int64_t epoch, int64_t batches) override;
  CopyTiming time_host_to_device_copy(int64_t bytes) override;

  // CompileProbe (python_run_compile.cpp): setup() passes RunOptions.compile to the recipe, after
  // starting torch._dynamo's records afresh (torchconform/_compile.py); compile_stats() reads them.
  void set_compile(bool compile, const std::string& cache_dir = "") override;
  CompileStats compile_stats() override;

  // DataParallelProbe (python_run_data_parallel.cpp): setup() passes RunOptions.data_parallel to
  // the recipe (a mode it declares in data_parallel_modes); the rest is torchconform/_fsdp.py.
  std::pair<int, int> join_process_group(const std::string& device) override;
  void set_data_parallel(const std::string& mode) override;
  NamedTensors full_parameters() override;
  ShardBytes shard_bytes() override;
  std::vector<std::string> all_gather_text(const std::string& text) override;
  void barrier() override;
  void leave_process_group() override;

  // AmpProbe (python_run_amp.cpp): setup() passes RunOptions.amp to the recipe (a dtype it lists in
  // amp_dtypes); Run.after_backward() calls the hook; scaler_state() is Run.scaler_state() (its
  // `scaler` attribute's state_dict()); amp_step_on() is the recipe's, given the workload as a
  // Python callable and its live parameters (not provided without it: the speed is not measured).
  void set_amp(const AmpOptions& options) override;
  void set_after_backward(std::function<void(const NamedTensors&)> hook) override;
  std::optional<GradScalerState> scaler_state() const override;
  std::function<double()> amp_step_on(const AmpWorkload& workload) override;

  // DistributedProvider (python_run_distributed.cpp): the recipe's DDP training (its
  // make_distributed(), else a new instance of its class when it declares "ddp"), trained under
  // torchrun in Python's default process group; ProbeNotProvided, naming why, for a recipe without.
  std::unique_ptr<DistributedRecipe> make_distributed() const override;
  // The last train_step()'s StepRecord.samples (empty where the recipe gave none).
  const std::vector<int64_t>& last_samples() const { return last_samples_; }

  // The Python object (for tests and probes that need it); use under the GIL.
  const pybind11::object& object() const { return instance_; }

 private:
  // With the GIL held: invoke(the bound method `name`), which makes the arguments, calls and
  // converts the result (every Python object is made and dropped under the GIL). A Python
  // exception becomes the runtime_error above.
  template <class Invoke>
  auto call(const char* name, Invoke invoke) const;
  // "ClassName.name()", for errors in the recipe's terms.
  std::string method(const char* name) const;
  // Whether the Python class provides the optional probe `name` (overrides it; torchconform's
  // provided_probes): the one answer to "which probes" for a Python recipe.
  bool provides(const char* name) const { return probes_.count(name) > 0; }
  // The same call for an optional probe; `absent` is tc::Run's default, run where the probe is
  // missing (provides() false, or the override raises NotImplementedError).
  template <class Absent, class Invoke>
  auto probe(const char* name, Absent absent, Invoke invoke) const;
  std::vector<at::Tensor> augmentations(int64_t epoch, int64_t batches);

  pybind11::object instance_;
  std::set<std::string> probes_;  // the optional probes the Python class overrides
  bool compile_ = false;          // set_compile(): RunOptions.compile of the next setup()
  std::string compile_cache_dir_;
  std::string data_parallel_;     // set_data_parallel(): RunOptions.data_parallel of the next setup()
  bool compile_begun_ = false;    // _compile.begin() ran: the destructor calls _compile.end()
  AmpOptions amp_;                // set_amp(): RunOptions.amp of the next setup()
  std::function<void(const NamedTensors&)> after_backward_;  // set_after_backward()
  pybind11::object amp_options() const;  // amp_ as a torchconform.AmpOptions (the GIL held)
  void begin_compile();           // before setup() with compile_ (python_run_compile.cpp)
  void end_compile() noexcept;    // in the destructor
  std::vector<int64_t> last_samples_;                     // train_step(): StepRecord.samples
  mutable std::shared_ptr<PythonGroupLease> ddp_group_;   // make_distributed(): the group its runs share
};

// The recipe method running, for the judging process (harness/util/breadcrumb.h).
struct __attribute__((visibility("hidden"))) InMethod {
  explicit InMethod(const char* name);
  ~InMethod();
  InMethod(const InMethod&) = delete;
  InMethod& operator=(const InMethod&) = delete;
};

// A float (or a one-element tensor) returned by the recipe; else std::runtime_error naming `what`
// and the Python type it has (the GIL held).
double float_from_python(const pybind11::handle& value, const std::string& what);

// Conversions between Python and C++ values, the GIL held. Each throws std::runtime_error naming
// `what` (the call that returned the value) when the value has the wrong type.
pybind11::object to_python(const at::Tensor& t);
at::Tensor tensor_from_python(const pybind11::handle& o, const std::string& what);
NamedTensors named_tensors_from_python(const pybind11::handle& o, const std::string& what);

}  // namespace tc::python
