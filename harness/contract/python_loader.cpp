#include "harness/contract/python_loader.h"

#include "harness/contract/one_slot.h"

namespace tc {

using PythonLoaderSlot = OneSlot<PythonLoader, struct PythonLoaderSlotTag>;

bool set_python_loader(PythonLoader loader) { return PythonLoaderSlot::set(std::move(loader), "a Python recipe loader"); }

const PythonLoader* python_loader() { return PythonLoaderSlot::get(); }

}  // namespace tc
