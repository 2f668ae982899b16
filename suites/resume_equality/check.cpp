// resume_equality: N steps straight == k steps + save + brand-new objects (global RNGs disturbed)
// + load + N-k steps, with k inside an epoch: losses, parameters and optimizer state bitwise equal.
#include <random>

#include <torch/torch.h>

#include "harness/tensor_compare.h"

namespace tc {
namespace {

CheckResult check_resume_equality(const CheckContext& ctx) {
  ScratchDir scratch;
  const std::string path = scratch.file("resume.pt");

  std::unique_ptr<Run> straight = ctx.make_run();
  straight->setup(run_options(ctx, ctx.seed));
  const int64_t spe = straight->steps_per_epoch();
  const int64_t k = spe + spe / 2;  // mid-way through the second epoch
  const int64_t n = 2 * spe + 2;    // and on across the next epoch boundary
  std::vector<double> expected;
  for (int64_t i = 0; i < n; ++i) expected.push_back(straight->train_step().loss);
  const NamedTensors params_expected = snapshot(straight->parameters());
  const NamedTensors opt_expected = snapshot(straight->optimizer_state());
  straight.reset();

  std::vector<double> resumed;
  {
    std::unique_ptr<Run> first = ctx.make_run();
    first->setup(run_options(ctx, ctx.seed));
    for (int64_t i = 0; i < k; ++i) resumed.push_back(first->train_step().loss);
    first->save_checkpoint(path);
  }
  // Brand-new objects, as a new process would build them; then disturb the global generators
  // (other work done before the load), so that only what the checkpoint restores is restored.
  std::unique_ptr<Run> second = ctx.make_run();
  second->setup(run_options(ctx, ctx.seed));
  torch::manual_seed(std::random_device{}());
  (void)torch::rand({257});
  second->load_checkpoint(path);
  for (int64_t i = k; i < n; ++i) resumed.push_back(second->train_step().loss);
  const NamedTensors params_resumed = snapshot(second->parameters());
  const NamedTensors opt_resumed = snapshot(second->optimizer_state());

  nlohmann::json m = {{"steps", n}, {"resume_at", k}, {"steps_per_epoch", spe},
                      {"loss_curve_straight", expected}, {"loss_curve_resumed", resumed},
                      {"optimizer_state_tensors", opt_expected.size()}};
  std::vector<std::string> problems;
  auto curve = first_difference(expected, resumed);
  m["first_divergence_step"] = curve ? nlohmann::json(*curve) : nlohmann::json(nullptr);
  if (curve) problems.push_back("losses diverge at " + describe_curve_difference(expected, resumed, *curve));
  auto param = first_tensor_difference(params_expected, params_resumed);
  m["first_diverging_tensor"] = param ? nlohmann::json(param->name) : nlohmann::json(nullptr);
  m["max_abs_diff"] = param ? param->max_abs_diff : 0.0;
  if (param) {
    problems.push_back("parameter '" + param->name + "' differs (max |diff| " +
                       format_double(param->max_abs_diff, 3) + ")" + param->detail);
  }
  if (opt_expected.empty()) problems.push_back("the straight run has no optimizer state to compare");
  auto opt = first_tensor_difference(opt_expected, opt_resumed);
  if (opt) {
    problems.push_back("optimizer state '" + opt->name + "' differs (max |diff| " +
                       format_double(opt->max_abs_diff, 3) + ")" + opt->detail);
  }
  if (!problems.empty()) {
    std::string ev = std::to_string(n) + " steps straight vs " + std::to_string(k) +
                     " + save/load + " + std::to_string(n - k) + ":";
    for (const auto& p : problems) ev += "\n- " + p;
    return CheckResult::fail(ev, m);
  }
  return CheckResult::pass(std::to_string(n) + " steps straight == " + std::to_string(k) +
                               " steps + save + new objects + load + " + std::to_string(n - k) +
                               " (resumed at batch " + std::to_string(k - spe) + " of epoch 1): losses, " +
                               std::to_string(params_expected.size()) + " parameters and " +
                               std::to_string(opt_expected.size()) +
                               " optimizer state tensors bitwise equal",
                           m);
}

}  // namespace
}  // namespace tc

TC_REGISTER_CHECK("resume_equality",
                  "N steps straight equal k steps + save + fresh objects + load + N-k steps "
                  "(k mid-epoch): losses, parameters, optimizer state bitwise",
                  tc::check_resume_equality);
