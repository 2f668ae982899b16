#include "harness/contract/python_loader.h"

#include <stdexcept>

namespace tc {
namespace {
PythonLoader& slot() {
  static PythonLoader loader;
  return loader;
}
}  // namespace

bool set_python_loader(PythonLoader loader) {
  if (slot()) throw std::logic_error("a Python recipe loader is already registered");
  slot() = std::move(loader);
  return true;
}

const PythonLoader* python_loader() { return slot() ? &slot() : nullptr; }

}  // namespace tc
