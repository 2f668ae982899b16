// libtorch_python's entry points the bridge uses to pass tensors without a copy (THPVariable_Wrap,
// the class a tensor is an instance of), found in the process once `import torch` has loaded that
// library, not linked: libtorch_python.so needs libtorch_cuda.so and the CUDA libraries, which every
// start of this program would then load on a machine without a GPU too (harness/contract/cuda_support.h).
#pragma once

#include "python/bridge/pybind.h"

namespace tc::python::torch_python {

// After `import torch` (the GIL held): finds the library torch loaded and the three symbols. Throws
// std::runtime_error naming what is missing.
void bind(const pybind11::module_& torch);

// THPVariable_Wrap: a new reference to a Python tensor sharing `t`'s storage.
PyObject* wrap(const at::TensorBase& t);

// THPVariable_Check: `o` is a torch.Tensor (or a subclass, a Parameter).
bool is_tensor(PyObject* o);

// THPVariable_Unpack: the tensor a Python tensor holds (the header's inline accessor; no symbol).
inline const at::Tensor& unpack(PyObject* o) { return THPVariable_Unpack(o); }

}  // namespace tc::python::torch_python
