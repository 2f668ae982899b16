#include "harness/contract/sanity.h"

#include <cmath>
#include <cstring>

#include <ATen/ATen.h>

namespace tc {
namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// The first parameter holding a NaN or an infinity, with how many of its elements do; "" when none.
std::string non_finite_parameter(const NamedTensors& params) {
  for (const auto& [name, t] : params) {
    if (!t.defined() || !t.is_floating_point()) continue;
    const at::Tensor bad = at::logical_not(at::isfinite(t.detach()));
    const int64_t n = bad.sum().item<int64_t>();
    if (n > 0) {
      const bool nan = at::isnan(t.detach()).any().item<bool>();
      return "'" + name + "' holds " + std::to_string(n) + " of " + std::to_string(t.numel()) + " elements " +
             (nan ? "NaN" : "infinite");
    }
  }
  return "";
}

}  // namespace

std::vector<SanityFinding> training_sanity(const RunFactory& make, const RunOptions& options) {
  std::vector<SanityFinding> out;
  std::unique_ptr<Run> run = make();
  if (run == nullptr) throw HarnessError("the recipe's factory made no run");
  run->setup(options);
  const int64_t per_epoch = run->steps_per_epoch();
  if (per_epoch <= 0) {
    out.push_back({"has_steps", false, true,
                   "steps_per_epoch() is " + std::to_string(per_epoch) + ": an epoch has no step to train or compare"});
    return out;
  }
  out.push_back({"has_steps", true, true, "an epoch has " + std::to_string(per_epoch) + " steps"});
  const int64_t steps = std::min(per_epoch, kSanitySteps);
  std::vector<double> losses;
  std::string bad_loss;
  for (int64_t i = 0; i < steps; ++i) {
    const double loss = run->train_step().loss;
    losses.push_back(loss);
    if (!std::isfinite(loss) && bad_loss.empty()) {
      bad_loss = "the loss is " + number(loss) + " at step " + std::to_string(i + 1) + " of a fresh run (seed " +
                 std::to_string(options.seed) + ")";
    }
  }
  out.push_back({"finite_loss", bad_loss.empty(), true,
                 bad_loss.empty() ? "the loss is finite at each of " + std::to_string(steps) + " steps" : bad_loss});
  const std::string bad_param = non_finite_parameter(run->parameters());
  out.push_back({"finite_parameters", bad_param.empty(), true,
                 bad_param.empty() ? "the parameters are finite after " + std::to_string(steps) + " steps"
                                   : "after " + std::to_string(steps) + " steps the parameter " + bad_param});
  if (steps < 2 || !bad_loss.empty()) {
    out.push_back({"loss_moves", true, false,
                   steps < 2 ? "one step per epoch: no second loss to compare" : "not judged over a non-finite loss"});
  } else {
    bool moved = false;
    for (double l : losses) moved = moved || std::memcmp(&l, &losses.front(), sizeof l) != 0;
    out.push_back({"loss_moves", moved, true,
                   moved ? "the loss changes over " + std::to_string(steps) + " steps"
                         : "the loss is bitwise " + number(losses.front()) + " at each of " + std::to_string(steps) +
                               " steps: nothing trains (frozen parameters, a detached loss, a zero learning rate "
                               "and one batch), so no check can tell its practice from a no-op"});
  }
  return out;
}

std::string first_broken(const std::vector<SanityFinding>& findings) {
  for (const SanityFinding& f : findings) {
    if (f.judged && !f.held) return f.promise + ": " + f.evidence;
  }
  return "";
}

}  // namespace tc
