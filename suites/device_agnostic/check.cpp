// device_agnostic: the recipe runs on every device of the matrix from one resolved device (every
// parameter, buffer, optimizer state and output on it), and where CPU and CUDA both exist their
// outputs from the same initial weights agree within rtol 1e-3 / atol 1e-4 (cuDNN may use TF32 and
// other algorithms than the CPU kernels).
#include <torch/torch.h>

#include "suites/support/tensor_compare.h"

namespace tc {
namespace {

struct DeviceRun {
  std::string problem;  // empty: ran, everything on the device
  at::Tensor initial_output;  // predict() before training, on the CPU
};

std::string misplaced(const NamedTensors& ts, const c10::Device& d, const char* what) {
  for (const auto& [n, t] : ts) {
    if (t.defined() && t.device() != d) {
      return std::string(what) + " '" + n + "' is on " + t.device().str() + ", the run's device is " + d.str();
    }
  }
  return "";
}

DeviceRun run_on(const CheckContext& ctx, const std::string& device) {
  CheckContext c = ctx;
  c.device = device;
  const RunOptions opts = run_options(c, ctx.seed);
  DeviceRun r;
  try {
    std::unique_ptr<Run> run = ctx.make_run();
    run->setup(opts);
    const at::Tensor x = run->example_input(8);
    r.initial_output = run->predict(x).cpu();
    for (int64_t i = 0; i < run->steps_per_epoch(); ++i) run->train_step();
    EvalResult e = run->evaluate();
    for (auto s : {misplaced(run->parameters(), opts.device, "parameter"),
                   misplaced(run->buffers(), opts.device, "buffer"),
                   misplaced(run->optimizer_state(), opts.device, "optimizer state"),
                   misplaced({{"logits", e.logits}}, opts.device, "eval output")}) {
      if (!s.empty()) {
        r.problem = "on " + device + ": " + s;
        break;
      }
    }
  } catch (const std::exception& e) {
    std::string what = e.what();
    r.problem = "on " + device + ": the recipe failed: " + what.substr(0, what.find("\nException raised from"));
  }
  return r;
}

CheckResult check_device_agnostic(const CheckContext& ctx) {
  std::vector<std::string> devices = {ctx.device};
  if (ctx.device != "cpu") devices.push_back("cpu");
  if (ctx.device != "cuda" && ctx.cuda_present) devices.push_back("cuda");
  std::map<std::string, DeviceRun> runs;
  std::vector<std::string> problems;
  for (const auto& d : devices) {
    runs[d] = run_on(ctx, d);
    if (!runs[d].problem.empty()) problems.push_back(runs[d].problem);
  }
  nlohmann::json m = {{"devices", devices}};
  if (problems.empty() && runs.count("cpu") && runs.count("cuda")) {
    const at::Tensor& a = runs["cpu"].initial_output;
    const at::Tensor& b = runs["cuda"].initial_output;
    m["cpu_cuda_max_abs_diff"] = max_abs_diff(a, b);
    if (!torch::allclose(a, b, 1e-3, 1e-4)) {
      problems.push_back("CPU and CUDA outputs from the same initial weights differ beyond rtol 1e-3 / "
                         "atol 1e-4 (max |diff| " + format_double(max_abs_diff(a, b), 3) + ")");
    }
  }
  if (!problems.empty()) {
    std::string ev = problems.front();
    for (size_t i = 1; i < problems.size(); ++i) ev += "\n" + problems[i];
    return CheckResult::fail(ev, m);
  }
  std::string ev = "trained and evaluated on " + nlohmann::json(devices).dump() +
                   " with every parameter, buffer, optimizer state and output on the resolved device";
  if (m.contains("cpu_cuda_max_abs_diff")) {
    ev += "; CPU vs CUDA outputs max |diff| " + format_double(m["cpu_cuda_max_abs_diff"].get<double>(), 3);
  } else {
    ev += "; no CUDA device here, so CPU vs CUDA was not compared";
  }
  return CheckResult::pass(ev, m);
}

}  // namespace
}  // namespace tc

namespace tc {
TC_CHECK(device_agnostic,
         "the recipe runs on every device from one resolved device; CPU vs CUDA within "
              "tolerance")
    ->Promise("runs_on_every_device", "the recipe runs on every device from one resolved device")
    ->Promise("cpu_cuda_tolerance", "CPU vs CUDA within tolerance");
}  // namespace tc
