// The bridge's one registration: `run --python` reaches load_python_recipe through the contract
// (harness/contract/python_loader.h). An object library, linked whole, so that the linker keeps
// this static registration (as the suites are).
#include "harness/contract/python_loader.h"
#include "harness/util/forking.h"
#include "python/bridge/interpreter.h"
#include "python/bridge/loader.h"

namespace {
const bool registered [[maybe_unused]] = tc::set_python_loader([](const std::string& spec) {
  return tc::python::load_python_recipes(spec);
});
const bool started [[maybe_unused]] = tc::set_python_starter([] {
  tc::python::ensure_interpreter();
  if (!tc::python::embedded_interpreter()) return false;
  tc::forking::warm_up();
  return true;
});
const bool torchrun [[maybe_unused]] = tc::set_python_torchrun(tc::python::run_torchrun);
}  // namespace
