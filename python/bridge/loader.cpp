#include "python/bridge/loader.h"

#include <map>
#include <memory>
#include <string>
#include <vector>
#include <stdexcept>

#include "python/bridge/interpreter.h"
#include "python/bridge/python_run.h"

namespace py = pybind11;

namespace tc::python {

PythonRecipe load_python_recipe(const std::string& spec, Registry& registry) {
  try {
    ensure_interpreter();
  } catch (const std::exception& e) {
    throw std::invalid_argument("--python '" + spec + "': " + e.what());
  }
  RecipeInfo info;
  std::string absolute;
  {
    py::gil_scoped_acquire gil;
    try {
      const py::tuple loaded = bridge_module().attr("load")(spec);
      // The class lives as long as the program, like a C++ recipe's type: never released (a
      // static py::object would be released after the interpreter's last use, at exit).
      auto* cls = new py::object(loaded[0]);
      info.name = loaded[1].cast<std::string>();
      info.description = loaded[2].cast<std::string>();
      info.file = loaded[3].cast<std::string>();
      info.line = loaded[4].cast<int>();
      absolute = loaded[5].cast<std::string>();
      info.language = "python";
      info.load_spec = absolute;
      // A broken variant declares what must catch it, as TC_RECIPE's ->MustBeCaughtBy, ->Breaks
      // and ->Needs do (torchconform.Run's class attributes; Registry::validate checks the names).
      info.targets = cls->attr("must_be_caught_by").cast<std::vector<std::string>>();
      info.breaks = cls->attr("breaks").cast<std::map<std::string, std::vector<std::string>>>();
      const py::object needs = cls->attr("needs");
      if (!needs.is_none()) info.needs = needs.cast<std::string>();
      // A variant derives from the control it breaks, and inherits the attribute: a variant all the same.
      info.control = info.targets.empty() && py::hasattr(*cls, "control") && cls->attr("control").cast<bool>();
      info.make = [cls]() -> std::unique_ptr<Run> {
        py::gil_scoped_acquire gil;
        try {
          return std::make_unique<PythonRun>((*cls)());
        } catch (py::error_already_set& e) {
          rethrow_python_error(e, py::str(cls->attr("__qualname__")).cast<std::string>() + "()");
        }
      };
    } catch (py::error_already_set& e) {
      // The bridge's own refusal says everything; an error in the user's file (a SyntaxError, an
      // ImportError) comes with its frames.
      if (e.matches(bridge_module().attr("SpecError"))) throw std::invalid_argument(py::str(e.value()).cast<std::string>());
      throw std::invalid_argument("--python '" + spec + "': " + describe_python_error(e));
    }
  }
  PythonRecipe out{info.name, absolute};
  registry.add_recipe(std::move(info));  // a duplicate name: std::invalid_argument naming both places
  return out;
}

std::vector<PythonRecipe> load_python_recipes(const std::string& spec, Registry& registry) {
  try {
    ensure_interpreter();
  } catch (const std::exception& e) {
    throw std::invalid_argument("--python '" + spec + "': " + e.what());
  }
  std::vector<std::string> specs;
  {
    py::gil_scoped_acquire gil;
    try {
      specs = bridge_module().attr("expand")(spec).cast<std::vector<std::string>>();
    } catch (py::error_already_set& e) {
      if (e.matches(bridge_module().attr("SpecError"))) throw std::invalid_argument(py::str(e.value()).cast<std::string>());
      throw std::invalid_argument("--python '" + spec + "': " + describe_python_error(e));
    }
  }
  std::vector<PythonRecipe> out;
  for (const std::string& one : specs) out.push_back(load_python_recipe(one, registry));
  return out;
}

}  // namespace tc::python
