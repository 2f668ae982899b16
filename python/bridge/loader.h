// `torchconform run --python path/to/file.py:Class[=name]`: the Python class as a registered recipe.
//
// The file is imported once per process under its stem (its directory goes on sys.path, so it
// imports its neighbours), the class must derive from torchconform.Run, and the recipe is
// registered at run time with Registry::add_recipe: named `name`, else the class's `name`
// attribute, else the class name in snake_case (MyRun -> my_run); described by the class's
// `description`, else its docstring's first line; a subject under test (no attributes), its place
// the file and the class's line. Each make() instantiates the class anew (under the GIL).
#pragma once

#include <string>
#include <vector>

#include "harness/contract/python_loader.h"
#include "harness/contract/registry.h"

namespace tc::python {

// Loads `spec` and registers its recipe in `registry`: its name, and the spec with the file made
// absolute. Starts the interpreter when needed. Throws std::invalid_argument naming the spec:
// malformed, a file or class that cannot be loaded (the Python error with its file:line), a name
// already registered.
PythonRecipe load_python_recipe(const std::string& spec, Registry& registry = Registry::global());
// `FILE.py:Class[=name]` (that one recipe) or `FILE.py` (every recipe class the file defines, in its
// order): loads and registers each.
std::vector<PythonRecipe> load_python_recipes(const std::string& spec, Registry& registry = Registry::global());

}  // namespace tc::python
