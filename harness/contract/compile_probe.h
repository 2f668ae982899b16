// How a check trains a recipe the way it ships compiled (torch.compile) and reads what the
// compiler did. torch.compile (TorchDynamo + Inductor) has no counterpart in LibTorch's C++
// frontend: a Python recipe implements this probe through the bridge (PythonRun in python/bridge/python_run.h,
// RunOptions.compile in python/torchconform/run.py); a C++ recipe does not, and the check
// `torch_compile` skips its cells, naming this interface. Found with dynamic_cast next to tc::Run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/contract/run.h"

namespace tc {

// One recompilation: a frame compiled again because a guard of its cached graph failed.
struct Recompilation {
  std::string function;  // the recompiled function, "name at file:line" (its first line)
  std::string guard;     // the guard that failed, as the compiler words it (e.g. "tensor 'x' size
                         // mismatch at index 0. expected 20, actual 16")
};

// One graph break: the compiler stopped the graph there and ran the rest as Python.
struct GraphBreak {
  std::string reason;  // the compiler's reason, first line (e.g. "Unsupported Tensor.item() call ...")
  std::string where;   // the user's file:line where the graph broke ("" when the compiler gave none)
};

// What the compiler did since setup() of a run set up with compilation on.
struct CompileStats {
  int64_t frames_compiled = 0;  // frames the compiler converted, recompilations included
  int64_t graphs = 0;           // distinct graphs it produced
  std::vector<Recompilation> recompilations;
  std::vector<GraphBreak> graph_breaks;  // each break once, as the compiler met it
};

class CompileProbe {
 public:
  virtual ~CompileProbe() = default;
  // Before setup(): train the way the recipe ships compiled (on) or eagerly (off, the default).
  // `cache_dir`, when not empty, is a fresh directory for the compiler's on-disk cache (a cold
  // warm-up); "" leaves the recipe's. setup() then starts the compiler's records afresh.
  virtual void set_compile(bool compile, const std::string& cache_dir = "") = 0;
  // What the compiler did since setup().
  virtual CompileStats compile_stats() = 0;
};

}  // namespace tc
