// step_hygiene's experiments on the recipe's own step (suites/step_hygiene/check.cpp): for an
// update the replay model (backward's gradient -> clip -> the recipe's optimizer) does not
// reproduce, the recipe may change the gradient or the parameters in ways the model does not know
// (weight decay written by hand, a gradient transform). The step itself is run again from the
// snapshot it began in (its checkpoint and the default generators' states), as it is and with one
// thing changed; the same code twice from the same state is bitwise the same, so any difference is
// the change's doing.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "harness/contract/registry.h"
#include "harness/contract/run.h"
#include "suites/support/generators.h"

namespace tc::step_hygiene {

struct Experiments {
  std::optional<std::string> stale_used;    // proven: a gradient left before the step moves the update
  std::optional<std::string> grad_ignored;  // proven: the backward's gradient does not move the update
  std::string held;                         // what the experiments showed of a correct step
};

// Runs the experiments from `before` (a checkpoint) and `gen` (the generators' states then); `start`
// the parameters there, `fresh` the gradient the step's backward produced (sizes the noise).
// Throws SkipCell when the step is not reproducible from that snapshot.
Experiments run_experiments(const CheckContext& ctx, const RunOptions& opts, const std::string& before,
                            const GeneratorStates& gen, const NamedTensors& start,
                            const std::vector<at::Tensor>& fresh);

}  // namespace tc::step_hygiene
