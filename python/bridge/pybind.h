// pybind11 and LibTorch's Python bindings, in one place: the Python headers must come first (they
// define feature macros the C library headers read), and THPVariable_* (libtorch_python) is how a
// tensor crosses without a copy.
#pragma once

#include <Python.h>  // first: see above

#include <pybind11/embed.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/autograd/python_variable.h>
