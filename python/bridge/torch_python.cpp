#include "python/bridge/torch_python.h"

#include <dlfcn.h>

#include <stdexcept>
#include <string>

namespace tc::python::torch_python {
namespace {

using WrapFn = PyObject* (*)(const at::TensorBase&);
WrapFn g_wrap = nullptr;
PyObject** g_variable_class = nullptr;   // THPVariableClass: torch._C.TensorBase
PyObject** g_parameter_class = nullptr;  // ParameterClass: torch.nn.Parameter

}  // namespace

void bind(const pybind11::module_& torch) {
  if (g_wrap != nullptr) return;
  // Loaded by torch/_C (a dependency of its extension module, which Python opens RTLD_LOCAL): found
  // by the name it was loaded under, else by its place in the torch package.
  void* lib = dlopen("libtorch_python.so", RTLD_LAZY | RTLD_NOLOAD);
  std::string where = "libtorch_python.so";
  if (lib == nullptr) {
    const std::string init = pybind11::str(torch.attr("__file__"));
    where = init.substr(0, init.rfind('/')) + "/lib/libtorch_python.so";
    lib = dlopen(where.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  }
  if (lib == nullptr) throw std::runtime_error("`import torch` did not load " + where + " into this process");
  // The mangled name of THPVariable_Wrap(const at::TensorBase&) (torch/csrc/autograd/python_variable.h).
  auto wrap_fn = reinterpret_cast<WrapFn>(dlsym(lib, "_Z16THPVariable_WrapRKN2at10TensorBaseE"));
  auto variable_class = static_cast<PyObject**>(dlsym(lib, "THPVariableClass"));
  auto parameter_class = static_cast<PyObject**>(dlsym(lib, "ParameterClass"));
  if (wrap_fn == nullptr || variable_class == nullptr || parameter_class == nullptr) {
    throw std::runtime_error(where + " lacks THPVariable_Wrap, THPVariableClass or ParameterClass: a torch whose "
                             "Python bindings this build does not know");
  }
  g_variable_class = variable_class;
  g_parameter_class = parameter_class;
  g_wrap = wrap_fn;
}

PyObject* wrap(const at::TensorBase& t) {
  if (g_wrap == nullptr) throw std::runtime_error("torch's Python bindings are not bound (torch not imported)");
  return g_wrap(t);
}

bool is_tensor(PyObject* o) {
  if (g_variable_class == nullptr || *g_variable_class == nullptr) return false;
  PyTypeObject* tp = Py_TYPE(o);
  if (tp == reinterpret_cast<PyTypeObject*>(*g_variable_class) ||
      (*g_parameter_class != nullptr && tp == reinterpret_cast<PyTypeObject*>(*g_parameter_class))) {
    return true;
  }
  const int r = PyObject_IsInstance(o, *g_variable_class);
  if (r == -1) {
    PyErr_Clear();
    return false;
  }
  return r == 1;
}

}  // namespace tc::python::torch_python
