// Probes of a recipe's optimizer and bare model that do not depend on the language it is written
// in. tc::Run::optimizer() and tc::Run::bare_model() answer with LibTorch objects, which a Python
// recipe's torch.optim optimizer and torch.nn.Module are not; a recipe whose objects are not
// LibTorch's implements these next to tc::Run (the Python bridge's PythonRun does), and the checks
// find them with dynamic_cast. For a C++ recipe the checks build OptimizerProbe from optimizer()
// (suites/support/optimizer_view.h), so a C++ recipe need not implement either.
#pragma once

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "harness/contract/run.h"

namespace tc {

// One parameter group: the live tensors it updates and the learning rate it uses now.
struct OptimizerGroupView {
  std::vector<at::Tensor> params;
  double lr = 0.0;
};

class OptimizerProbe {
 public:
  virtual ~OptimizerProbe() = default;
  // The update rule by its PyTorch name: "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", or the
  // optimizer's own class name when it is none of these (a subclass answers its base's name).
  virtual std::string optimizer_algorithm() = 0;
  virtual std::vector<OptimizerGroupView> optimizer_groups() = 0;
  // One update from the gradients the parameters hold now (optimizer.step()), nothing else.
  virtual void optimizer_step() = 0;
};

// What loading a checkpoint's model state strictly into a freshly built, unwrapped model gave.
struct BareModelLoad {
  enum class Outcome {
    kLoaded,         // strict load succeeded: `parameters` are the bare model's, after the load
    kRefused,        // the file's model state does not load strictly (other keys or shapes, no
                     // model state, a pickled module object instead of its state): `detail` says why
    kUnknownFormat,  // the file is in a format of the recipe's own: its model state cannot be found
  };
  Outcome outcome = Outcome::kRefused;
  NamedTensors parameters;
  std::string detail;
};

class BareModelProbe {
 public:
  virtual ~BareModelProbe() = default;
  // Builds a fresh bare model and loads the model state of the checkpoint at `path` into it
  // strictly. Other errors (the file cannot be read) throw.
  virtual BareModelLoad load_into_bare_model(const std::string& path) = 0;
};

}  // namespace tc
