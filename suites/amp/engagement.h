// Which dtype the matmul-class work of a step actually ran in, observed while it runs (an
// at::RecordFunction callback on the calling thread, with the ops' inputs).
//
// Matmul-class: the ops autocast lists as lower-precision for CPU and CUDA (conv*, linear, matmul,
// mm, addmm, bmm, baddbmm, addbmm, scaled_dot_product_attention) and the kernels they call
// (convolution, _convolution, mkldnn_convolution, convolution_backward, _scaled_dot_product_*).
// One call is counted per innermost matmul-class op (the kernel that did the arithmetic: aten::linear
// under autocast calls aten::linear again on the cast operands, which calls aten::addmm), in the
// dtype of its first floating-point tensor input, and named by its outermost matmul-class op (and
// the autograd node, for backward work) with the operands' shapes.
#pragma once

#include <map>
#include <string>

#include <c10/core/ScalarType.h>

#include "harness/contract/run.h"
#include "suites/support/kit.h"

namespace tc::amp {

struct MatmulDtypes {
  // "aten::linear [16, 1024] x [4, 1024]" -> dtype -> calls
  std::map<std::string, std::map<c10::ScalarType, int64_t>> by_op;
  int64_t total = 0;
};

// While alive, observes the ops dispatched on this thread (not nestable).
class MatmulDtypeObserver {
 public:
  MatmulDtypeObserver();
  ~MatmulDtypeObserver();
  MatmulDtypeObserver(const MatmulDtypeObserver&) = delete;
  MatmulDtypeObserver& operator=(const MatmulDtypeObserver&) = delete;
  MatmulDtypes result() const;

 private:
  uint64_t handle_ = 0;
};

bool is_matmul_class(const std::string& op);

// Judges the "engagement" promise into `out`: one train_step() of `run` (set up for mixed
// precision in `dtype`) observed; held when every matmul-class call ran in `dtype`, broken naming
// the ops that did not; returns whether it held. Throws HarnessError when no matmul-class call was
// observed at all.
bool engagement(Run& run, c10::ScalarType dtype, const std::string& device, Findings& out);

}  // namespace tc::amp
