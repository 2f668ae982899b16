// Comparison of a recipe's tensors with an independent recomputation, within a bound derived from
// floating-point analysis (not bitwise: correct code that does the same arithmetic another way, in
// another order or precision, differs by a few units of roundoff). For checks (suites/); LibTorch.
//
//   NamedTensors bound = ...;  // per element: k * unit_roundoff_of(dtype) * |the values involved|
//   Tolerance t = compare_within(recipe, recomputed, bound);
//   if (!t.within()) f.broken("x", "'" + t.name + "': " + describe(t));  // "|diff| 3e-04 vs bound ..."
//
// Bitwise comparisons stay for what is bitwise by nature (the same code run twice: reproducibility,
// resume): tensor_compare.h.
#pragma once

#include <string>

#include <c10/core/ScalarType.h>

#include "harness/contract/run.h"

namespace tc {

// Unit roundoff u of a floating dtype: half the gap from 1 to the next number; every correctly
// rounded operation has relative error at most u (fp64 2^-53, fp32 2^-24, fp16 2^-11, bf16 2^-8).
double unit_roundoff_of(c10::ScalarType dtype);

// The worst element of an elementwise comparison |actual - expected| <= bound.
struct Tolerance {
  std::string name;          // the tensor holding the worst element ("" when every tensor is empty)
  int64_t index = -1;        // its flat index
  double diff = 0.0;         // |actual - expected| there
  double bound = 0.0;        // the bound there
  double ratio = 0.0;        // diff / bound: the margin (<= 1 within; infinity: shapes, names differ,
                             // a non-finite value, or a difference where the bound is 0)
  double max_abs_diff = 0.0; // the largest |actual - expected| over every tensor
  std::string detail;        // set when the tensors cannot be compared element by element
  bool within() const { return ratio <= 1.0; }
};

// Compares the tensors of `actual` and `expected` (same names, order, shapes) element by element
// against `bound` (non-negative, same names and shapes); the element with the largest ratio.
// Tensors undefined in both are skipped.
Tolerance compare_within(const NamedTensors& actual, const NamedTensors& expected, const NamedTensors& bound);

// "'fc.weight'[12]: |diff| 7.45e-09, bound 1.19e-08 (0.625 of the bound)", or the detail.
std::string describe(const Tolerance& t);

}  // namespace tc
