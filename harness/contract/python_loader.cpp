#include "harness/contract/python_loader.h"

#include "harness/contract/one_slot.h"

namespace tc {

using PythonLoaderSlot = OneSlot<PythonLoader, struct PythonLoaderSlotTag>;

bool set_python_loader(PythonLoader loader) { return PythonLoaderSlot::set(std::move(loader), "a Python recipe loader"); }

const PythonLoader* python_loader() { return PythonLoaderSlot::get(); }

using PythonStarterSlot = OneSlot<PythonStarter, struct PythonStarterSlotTag>;

bool set_python_starter(PythonStarter starter) {
  return PythonStarterSlot::set(std::move(starter), "a Python interpreter starter");
}

const PythonStarter* python_starter() { return PythonStarterSlot::get(); }

using PythonTorchrunSlot = OneSlot<PythonTorchrun, struct PythonTorchrunSlotTag>;

bool set_python_torchrun(PythonTorchrun run) { return PythonTorchrunSlot::set(std::move(run), "a Python torchrun"); }

const PythonTorchrun* python_torchrun() { return PythonTorchrunSlot::get(); }

}  // namespace tc
