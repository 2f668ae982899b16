// torchconform._native: the whole command line (tc::cli_main, every check and the Python bridge) as a
// CPython extension module, so that the checks run inside the team's own interpreter (the wheel:
// pyproject.toml, docs/python.md "pip install"). python/torchconform/__main__.py calls main(); the
// processes a check starts again run `launcher`, a script that starts this same interpreter on
// `-m torchconform` (the binary's /proc/self/exe would be the interpreter itself).
#include <string>
#include <vector>

#include "harness/cli.h"
#include "python/bridge/pybind.h"

#include <pybind11/stl.h>

namespace py = pybind11;

PYBIND11_MODULE(_native, m) {
  m.doc() = "torchconform's command line inside this interpreter (python -m torchconform)";
  m.def(
      "main",
      [](std::vector<std::string> args, const std::string& launcher) {
        if (!launcher.empty()) tc::set_self_executable(launcher);
        std::vector<char*> argv;
        argv.reserve(args.size() + 1);
        for (std::string& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        // The checks run on this thread and on threads of their own, each taking the GIL only for
        // its calls into Python (python/bridge/interpreter.h): not held while the command runs.
        py::gil_scoped_release release;
        return tc::cli_main(static_cast<int>(args.size()), argv.data());
      },
      py::arg("argv"), py::arg("launcher") = std::string(),
      "Runs `torchconform ARGV[1:]` and returns its exit code; `launcher` is the program that the "
      "processes it starts run (a script that starts this interpreter on -m torchconform).");
}
