// device_agnostic: the recipe runs on every device of the matrix from one resolved device (every
// parameter, buffer, optimizer state and output on it), and where CPU and CUDA both exist their
// outputs from the same initial weights agree within rtol 1e-3 / atol 1e-4 (cuDNN may use TF32 and
// other algorithms than the CPU kernels).
#include <torch/torch.h>

#include "harness/util/text_format.h"
#include "suites/device_agnostic/judge.h"
#include "suites/support/kit.h"
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
  {
    // A recipe that puts a tensor on a device other than the resolved one either leaves it there
    // (misplaced(), below) or throws where that device does not exist or two devices meet: the
    // errors the check declares as its detection (below). Any other error escapes as the recipe's.
    std::unique_ptr<Run> run = fresh_run(ctx, opts);
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
  }
  return r;
}

// Trains and evaluates on every device of the matrix; returns the runs (for the comparison below).
std::map<std::string, DeviceRun> runs_on_every_device(const CheckContext& ctx, Findings& out) {
  std::vector<std::string> devices = {ctx.device};
  if (ctx.device != "cpu") devices.push_back("cpu");
  if (ctx.device != "cuda" && ctx.cuda_present) devices.push_back("cuda");
  out.metrics()["devices"] = devices;
  std::map<std::string, DeviceRun> runs;
  std::string problems;
  for (const auto& d : devices) {
    runs[d] = run_on(ctx, d);
    if (!runs[d].problem.empty()) problems += (problems.empty() ? "" : "; ") + runs[d].problem;
  }
  if (!problems.empty()) {
    out.broken("runs_on_every_device",
               problems + (runs.count("cpu") && runs.count("cuda") ? " (so CPU vs CUDA was not compared)" : ""));
  } else {
    out.held("runs_on_every_device", "trained and evaluated on " + nlohmann::json(devices).dump() +
                                         " with every parameter, buffer, optimizer state and output on the "
                                         "resolved device" +
                                         (runs.count("cuda") ? "" : "; no CUDA device here, so CPU vs CUDA was not compared"));
  }
  return runs;
}

}  // namespace

// Same initial weights on CPU and CUDA: outputs within rtol 1e-3 / atol 1e-4.
void judge_cpu_cuda_tolerance(const at::Tensor& a, const at::Tensor& b, Findings& out) {
  const double diff = max_abs_diff(a, b);
  out.metrics()["cpu_cuda_max_abs_diff"] = diff;
  if (!torch::allclose(a, b, 1e-3, 1e-4)) {
    out.broken("cpu_cuda_tolerance", "CPU and CUDA outputs from the same initial weights differ beyond rtol 1e-3 / "
                                     "atol 1e-4 (max |diff| " + fmt::sig(diff, 3) + ")");
  } else {
    out.held("cpu_cuda_tolerance", "CPU vs CUDA outputs max |diff| " + fmt::sig(diff, 3));
  }
}

namespace {

CheckResult check_device_agnostic(const CheckContext& ctx) {
  Findings f;
  std::map<std::string, DeviceRun> runs = runs_on_every_device(ctx, f);
  // Compared where both ran through (a failed run may have no output to compare).
  if (!runs.count("cuda")) {
    f.recorded("cpu_cuda_tolerance", "CPU vs CUDA: not compared (no CUDA device on this machine)");
  } else if (f.any_broken()) {
    f.recorded("cpu_cuda_tolerance", "CPU vs CUDA: not compared (a run did not complete on every device)");
  } else {
    judge_cpu_cuda_tolerance(runs["cpu"].initial_output, runs["cuda"].initial_output, f);
  }
  return f.result();
}

}  // namespace
}  // namespace tc

namespace tc {
TC_CHECK(device_agnostic,
         "the recipe runs on every device from one resolved device; CPU vs CUDA within "
              "tolerance")
    ->Promise("runs_on_every_device", "the recipe runs on every device from one resolved device")
    ->Promise("cpu_cuda_tolerance", "CPU vs CUDA within tolerance")
    // The reference's cell on a machine without CUDA: nothing to compare with.
    ->NotJudged("cpu_cuda_tolerance", 1)
    // CUDA asked for on a machine without a usable CUDA device (the device was not the resolved one):
    // LibTorch's words for it, by driver state and build.
    ->DetectsByThrowing("runs_on_every_device", "CUDA driver version is insufficient")
    ->DetectsByThrowing("runs_on_every_device", "Found no NVIDIA driver")
    ->DetectsByThrowing("runs_on_every_device", "no CUDA-capable device is detected")
    ->DetectsByThrowing("runs_on_every_device", "Torch not compiled with CUDA enabled")
    // A LibTorch without its CUDA half loaded: a CPU-only build, or this program where no CUDA
    // driver is (harness/contract/cuda_support.h).
    ->DetectsByThrowing("runs_on_every_device", "PyTorch is not linked with support for cuda devices")
    // Two devices in one op: a tensor made on the default device beside the resolved one.
    ->DetectsByThrowing("runs_on_every_device", "Expected all tensors to be on the same device");
}  // namespace tc
