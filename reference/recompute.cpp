#include "reference/recompute.h"

#include <mutex>

#include <torch/torch.h>

namespace tc::ref {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct RngStates {
  at::Tensor cpu;
  at::Tensor cuda;  // of x's device, when x is on CUDA
  c10::Device device = c10::Device(c10::kCPU);

  static RngStates capture(const c10::Device& d) {
    RngStates s;
    s.device = d;
    auto cpu = at::globalContext().defaultGenerator(at::kCPU);
    {
      std::lock_guard<std::mutex> l(cpu.mutex());
      s.cpu = cpu.get_state();
    }
    if (d.is_cuda()) {
      auto g = at::globalContext().defaultGenerator(d);
      std::lock_guard<std::mutex> l(g.mutex());
      s.cuda = g.get_state();
    }
    return s;
  }
  void restore() const {
    auto cpu_gen = at::globalContext().defaultGenerator(at::kCPU);
    {
      std::lock_guard<std::mutex> l(cpu_gen.mutex());
      cpu_gen.set_state(cpu);
    }
    if (cuda.defined()) {
      auto g = at::globalContext().defaultGenerator(device);
      std::lock_guard<std::mutex> l(g.mutex());
      g.set_state(cuda);
    }
  }
};

struct RecomputeFunction : torch::autograd::Function<RecomputeFunction> {
  static variable_list forward(AutogradContext* ctx, const Segment* segment, const at::Tensor& x,
                               at::TensorList params) {
    RngStates rng = RngStates::capture(x.device());
    ctx->saved_data["segment"] = reinterpret_cast<int64_t>(segment);
    ctx->saved_data["rng_cpu"] = rng.cpu;
    ctx->saved_data["rng_cuda"] = rng.cuda.defined() ? c10::IValue(rng.cuda) : c10::IValue();
    ctx->saved_data["x_requires_grad"] = x.requires_grad();
    variable_list to_save{x};
    to_save.insert(to_save.end(), params.begin(), params.end());
    ctx->save_for_backward(to_save);
    torch::NoGradGuard no_grad;  // no activations kept
    return {(*segment)(x)};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    variable_list saved = ctx->get_saved_variables();
    const at::Tensor x = saved[0];
    const variable_list params(saved.begin() + 1, saved.end());
    const auto* segment = reinterpret_cast<const Segment*>(ctx->saved_data["segment"].toInt());
    const bool x_grad = ctx->saved_data["x_requires_grad"].toBool();

    RngStates seen;
    seen.device = x.device();
    seen.cpu = ctx->saved_data["rng_cpu"].toTensor();
    if (ctx->saved_data["rng_cuda"].isTensor()) seen.cuda = ctx->saved_data["rng_cuda"].toTensor();
    const RngStates now = RngStates::capture(x.device());
    seen.restore();  // the recomputation draws what the forward drew (dropout masks)
    at::Tensor x_in = x.detach().requires_grad_(x_grad);
    at::Tensor out;
    {
      torch::AutoGradMode enable(true);
      out = (*segment)(x_in);
    }
    now.restore();  // and leaves the global stream where it was

    // Only what requires a gradient: a frozen parameter (requires_grad off, as fine-tuning freezes
    // a stem) gets none, and autograd::grad refuses an input that does not require one.
    variable_list inputs;
    if (x_grad) inputs.push_back(x_in);
    for (const at::Tensor& p : params) {
      if (p.requires_grad()) inputs.push_back(p);
    }
    variable_list grads;
    if (!inputs.empty()) {
      grads = torch::autograd::grad({out}, inputs, {grad_outputs[0]},
                                    /*retain_graph=*/false, /*create_graph=*/false,
                                    /*allow_unused=*/true);
    }
    variable_list result{at::Tensor()};  // the segment pointer
    size_t k = 0;
    result.push_back(x_grad ? grads[k++] : at::Tensor());
    for (const at::Tensor& p : params) result.push_back(p.requires_grad() ? grads[k++] : at::Tensor());
    return result;
  }
};

}  // namespace

at::Tensor recompute(const Segment& segment, const at::Tensor& x, const std::vector<at::Tensor>& params) {
  return RecomputeFunction::apply(&segment, x, at::TensorList(params))[0];
}

}  // namespace tc::ref
