// The state any torch::optim optimizer keeps per parameter, as named tensors (Run::optimizer_state):
// "<parameter>.<buffer>" for SGD (momentum_buffer), Adam and AdamW (exp_avg, exp_avg_sq,
// max_exp_avg_sq with amsgrad, step), RMSprop (square_avg, momentum_buffer, grad_avg), Adagrad
// (sum, step). Another optimizer's state (LBFGS, one of your own) is read through its own
// serialize(): every tensor and integer it writes, under the same naming.
#pragma once

#include "harness/contract/run.h"

namespace tc::ref {

NamedTensors named_optimizer_state(torch::optim::Optimizer& optimizer, const NamedTensors& parameters);

}  // namespace tc::ref
