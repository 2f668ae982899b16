// Recipes written in Python: `torchconform run --python path/to/file.py:Class[=name]` (repeatable),
// or `--python path/to/file.py`: every recipe class (torchconform.Run subclass) the file defines.
//
// The Python bridge (python/bridge/, a layer above the contract) loads the class in the interpreter
// it embeds and registers a tc::Run that adapts it, at run time, with Registry::add_recipe. It hands
// its loader to the command line through this one registration, as qualify's device half
// (suites/qualify_probes/) hands over its worker (qualify_probe.h): the command line includes only the contract, and a binary built without
// the bridge says so rather than knowing nothing of Python.
//
//   static const bool registered = tc::set_python_loader([](const std::string& spec) {
//     ... import the file, register its recipes ...; return std::vector<tc::PythonRecipe>{...};
//   });
//
// A process the runner starts again (a part of a cell in a fresh process, a torchrun rank, a
// recipe's process) must load the cell's recipe before it looks it up: each PythonRecipe's `spec`
// (absolute, one class) becomes RecipeInfo::load_spec, which CheckContext::python_specs passes on
// as `--python SPEC`, and nothing else (the other recipes of the run are not loaded there).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace tc {

// What loading a spec registered.
struct PythonRecipe {
  std::string name;  // the recipe's name in the registry
  std::string spec;  // the spec with its file made absolute: what a process started again is given
};

// Loads the recipes `spec` names (one class, or every recipe class of a file) and registers them in
// Registry::global(). Throws std::invalid_argument for a malformed spec, a file or class that cannot
// be loaded (the Python error in the message), or a name already registered.
using PythonLoader = std::function<std::vector<PythonRecipe>(const std::string& spec)>;

// Registers the one loader (static registration from python/bridge); a second throws
// std::logic_error. Returns true, for `static const bool x = set_python_loader(...)`.
bool set_python_loader(PythonLoader loader);
// The registered loader; nullptr in a binary built without the Python bridge.
const PythonLoader* python_loader();

// Starts the interpreter the loader uses, imports torch and warms up what every recipe's process
// would import (harness/util/forking.h: warm_up), and loads no recipe file: the state a torchrun
// rank's template is forked in (harness/rank_server.h). True when this process embeds the
// interpreter it started; false in a hosting Python (the wheel's module: its ranks start by exec).
// Throws std::runtime_error when the interpreter cannot start.
using PythonStarter = std::function<bool()>;
bool set_python_starter(PythonStarter starter);
const PythonStarter* python_starter();  // nullptr without the bridge

// Runs torchrun with `args` (torch.distributed.run's main, the pinned torch's: what the `torchrun`
// script runs) in this process's interpreter, in a fork made to be that torchrun
// (harness/multi_process.h): its exit status. -1, having run nothing, where this process has no
// interpreter it started and imported torch in (none, or a hosting Python's): the caller then starts
// torchrun by exec. os.environ is made the C environment's first (the fork's added variables).
using PythonTorchrun = std::function<int(const std::vector<std::string>& args)>;
bool set_python_torchrun(PythonTorchrun run);
const PythonTorchrun* python_torchrun();  // nullptr without the bridge

}  // namespace tc
