// The CPython interpreter that runs Python recipes (`run --python FILE.py:Class`): the team's own
// where it hosts the checks (the extension module torchconform._native, python/module/native.cpp,
// the wheel), else the one the binary embeds.
//
// Hosted (Py_IsInitialized() when first asked): nothing is started or added to sys.path; the same
// torch version check and bridge import are made, in the host's interpreter and its environment.
//
// Embedded: started once per process, lazily: a binary that never loads a Python recipe never starts it. It is
// the libpython the build linked (Debian's python3.11-dev by default, TC_EMBED_PYTHON in CMake),
// with its own standard library, configured isolated (PYTHONPATH and PYTHONHOME are not read, no
// signal handlers: the harness owns SIGINT and kills its children itself). sys.path gets, in front:
//   1. the project's python/ directory (the `torchconform` package), when it exists;
//   2. the site-packages of the venv holding the pinned torch: $TORCHCONFORM_VENV's
//      lib/pythonX.Y/site-packages when that variable is set, else the site-packages of the Python
//      the build was configured with (TC_PYTHON), processed as a site directory (.pth files);
//   3. each recipe file's own directory, as it is loaded (python/bridge/loader.h).
// Then it imports torch, and refuses a torch whose version is not the LibTorch this binary runs
// (both must be the one wheel's libraries: a tensor crosses as the same object, without a copy).
//
// The GIL is released once started; every call into Python takes it (pybind11::gil_scoped_acquire)
// only for its own duration.
#pragma once

#include <string>
#include <vector>

#include "python/bridge/pybind.h"

namespace tc::python {

// Starts the interpreter if it is not running (any thread; the first call does the work). Throws
// std::runtime_error naming what was missing (the venv, torch, a version mismatch).
void ensure_interpreter();

// What the interpreter was given (after ensure_interpreter()).
struct InterpreterInfo {
  std::string site_packages;  // the venv's, put on sys.path
  std::string package_dir;    // the project's python/ directory, or empty
  std::string version;        // sys.version of the embedded interpreter
};
const InterpreterInfo& interpreter_info();

// Whether this process started the interpreter it embeds (false before ensure_interpreter(), and in a
// hosting Python).
bool embedded_interpreter();

// torchrun (torch.distributed.run's main) with `args` in this process's interpreter: the exit status
// the `torchrun` script would end with, or -1, having run nothing, where this process did not start
// the interpreter (harness/contract/python_loader.h: PythonTorchrun).
int run_torchrun(const std::vector<std::string>& args);

// The bridge's helpers (torchconform._bridge); the caller holds the GIL.
pybind11::module_ bridge_module();

// A Python exception as the C++ error a check sees: std::runtime_error whose message is
// "<where> raised <Type>: <message>" followed by the innermost frames of the user's code as
// "  at FILE:LINE in FUNCTION". The caller holds the GIL.
[[noreturn]] void rethrow_python_error(pybind11::error_already_set& e, const std::string& where);
// The same text, for a caller that throws another type.
std::string describe_python_error(pybind11::error_already_set& e);

}  // namespace tc::python
