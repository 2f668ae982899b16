#include "suites/amp/scaler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include <torch/torch.h>

#include "harness/util/text_format.h"
#include "suites/amp/session.h"
#include "suites/support/numbers.h"
#include "suites/support/tensor_compare.h"

namespace tc::amp {
namespace {

// Per-tensor gradient norms (float64), in order; tensors without a gradient skipped.
std::vector<double> grad_norms(const NamedTensors& params) {
  std::vector<double> out;
  for (const auto& [n, p] : params) {
    if (p.grad().defined()) out.push_back(p.grad().detach().to(torch::kCPU, torch::kDouble).norm().item<double>());
  }
  return out;
}

// Whether each seen norm is min(raw_i / scale, threshold) within rel (per-tensor clipping at
// `threshold` of the unscaled gradients).
bool per_tensor_clip(const std::vector<double>& raw, const std::vector<double>& seen, double scale, double threshold,
                     double rel) {
  if (raw.size() != seen.size() || raw.empty()) return false;
  bool any_clipped = false;
  for (size_t i = 0; i < raw.size(); ++i) {
    const double g = raw[i] / scale;
    const double want = g > threshold ? threshold * g / (g + 1e-6) : g;
    any_clipped = any_clipped || g > threshold;
    if (std::abs(seen[i] - want) > rel * std::max(want, 1e-30)) return false;
  }
  return any_clipped;
}

// Injects an inf into the first gradient of step `inject` (through the after-backward hook) and
// notes whether each step's gradients (scaled, after backward and the injection) were all finite:
// the independent oracle of which steps a scaler must skip (exactly those), not the recipe's own.
struct InfInjector {
  InfInjector(AmpProbe& probe, int64_t inject, int64_t steps) : probe_(probe), finite_grads(static_cast<size_t>(steps), true) {
    probe_.set_after_backward([this, inject](const NamedTensors& ps) {
      torch::NoGradGuard no_grad;
      if (now == inject) {
        for (const auto& [n, p] : ps) {
          if (!p.grad().defined()) continue;
          p.grad().view({-1}).select(0, 0).fill_(std::numeric_limits<double>::infinity());
          injected = true;
          break;
        }
      }
      bool finite = true;
      for (const auto& [n, p] : ps) {
        if (p.grad().defined() && !torch::isfinite(p.grad()).all().item<bool>()) finite = false;
      }
      if (now >= 0 && now < static_cast<int64_t>(finite_grads.size())) finite_grads[static_cast<size_t>(now)] = finite;
    });
  }
  ~InfInjector() { probe_.set_after_backward({}); }
  InfInjector(const InfInjector&) = delete;
  InfInjector& operator=(const InfInjector&) = delete;

  AmpProbe& probe_;
  int64_t now = -1;  // the step being taken
  bool injected = false;
  std::vector<bool> finite_grads;
};

}  // namespace

double small_gradient_weight(const CheckContext& ctx) {
  Amp f = fresh(ctx, amp_options(c10::kFloat));
  at::Tensor raw;
  f.probe->set_after_backward([&raw](const NamedTensors& ps) { raw = flat(ps, true); });
  f.run->train_step();
  if (!raw.defined()) hook_not_called();
  if (raw.numel() == 0) throw std::runtime_error("the recipe's fp32 step produced no gradient");
  at::Tensor nz = raw.abs();
  nz = nz.masked_select(nz > 0);
  if (nz.numel() == 0) throw HarnessError("every gradient element of the fp32 step is zero");
  const double median = nz.median().item<double>();
  return std::ldexp(1.0, static_cast<int>(std::lround(std::log2(std::ldexp(1.0, -20) / median))));
}

void underflow(const CheckContext& ctx, double w, Findings& out) {
  nlohmann::json& m = out.metrics();
  constexpr double kMaxFlushed = 1e-3;
  Amp f = fresh(ctx, amp_options(c10::kFloat, w));
  f.run->train_step();
  const at::Tensor g32 = flat(f.run->parameters(), true);
  // The fp16 step must be one the scaler lets through: at the initial scale the scaled loss (or a
  // gradient) may overflow fp16, and the scaler then skips the step and backs off, as PyTorch
  // designs it. A fresh run at the backed-off scale takes the same first step on the same batch
  // and parameters as the fp32 run, until one goes through (at most 8 scales).
  AmpOptions o = amp_options(c10::kHalf, w);
  at::Tensor g16;
  nlohmann::json overflowed = nlohmann::json::array();
  std::string overflow_text;
  bool h_scaled = false;
  double last_tried = o.scaler.init_scale;
  for (int attempt = 0; attempt < 8 && !g16.defined(); ++attempt) {
    Amp h = fresh(ctx, o);
    const auto s0 = h.probe->scaler_state();
    const StepRecord r = h.run->train_step();
    const auto s1 = h.probe->scaler_state();
    last_tried = o.scaler.init_scale;
    if (!s0 || !s1 || s1->scale >= s0->scale) {
      g16 = flat(h.run->parameters(), true);
      h_scaled = s0.has_value();
      break;
    }
    const double scaled_loss = std::abs(r.loss) * s0->scale;
    const bool loss_overflow = !std::isfinite(r.loss) || scaled_loss > 65504.0;
    overflowed.push_back({{"scale", s0->scale}, {"loss", r.loss}, {"scaled_loss", scaled_loss},
                          {"scaled_loss_overflows_fp16", loss_overflow}});
    if (overflow_text.empty()) {
      overflow_text = "at the initial scale " + sci(s0->scale) + " the GradScaler skipped the fp16 step (" +
                      (loss_overflow ? "loss " + fmt::sig(r.loss) + " x scale " + sci(s0->scale) + " = " +
                                           sci(scaled_loss) + " > fp16's largest 65504: the scaled loss overflowed fp16"
                                     : "a gradient was non-finite; the scaled loss " + sci(scaled_loss) +
                                           " is within fp16's range" +
                                           (s0->scale > 65504.0 ? ", the scale itself exceeds fp16's largest 65504 "
                                                                  "(the gradient a loss computed in fp16 receives)"
                                                                : std::string())) +
                      "), as PyTorch designs it";
    }
    o.scaler.init_scale = s1->scale;
  }
  m["underflow_overflow_skips"] = overflowed;
  if (!g16.defined()) {
    out.broken("underflow", "underflow: the scaler skipped the fp16 step at each of " + std::to_string(overflowed.size()) +
                                " scales down to " + sci(last_tried) + "; " + overflow_text);
    return;
  }
  if (!overflowed.empty()) {
    out.recorded("underflow", "overflow: " + overflow_text + "; underflow measured on the step at scale " +
                                  sci(o.scaler.init_scale) + ", the first the scaler let through");
  }
  if (g16.numel() != g32.numel()) {
    out.broken("underflow", "underflow: the fp16 step left gradients on other parameters than the fp32 step");
    return;
  }
  const int64_t nonzero = (g32 != 0).sum().item<int64_t>();
  const int64_t flushed = ((g32 != 0) & (g16 == 0)).sum().item<int64_t>();
  const int64_t below = ((g32.abs() < std::ldexp(1.0, -24)) & (g32 != 0)).sum().item<int64_t>();
  const bool finite = torch::isfinite(g16).all().item<bool>();
  const double frac = nonzero ? static_cast<double>(flushed) / static_cast<double>(nonzero) : 0.0;
  m["underflow"] = {{"loss_weight", w}, {"nonzero_fp32", nonzero}, {"flushed", flushed}, {"flushed_fraction", frac},
                    {"fp32_below_fp16_subnormal", below}, {"max_flushed_fraction", kMaxFlushed},
                    {"finite", finite}, {"scale", o.scaler.init_scale}};
  const std::string what = "underflow (fp16, loss x " + sci(w) + " so the median fp32 gradient is 2^-20): " +
                           std::to_string(flushed) + " of " + std::to_string(nonzero) +
                           " non-zero fp32 gradient elements flushed to zero (" + fmt::sig(100 * frac, 3) +
                           "%; " + std::to_string(below) + " lie under fp16's smallest subnormal 2^-24; bar " +
                           fmt::sig(100 * kMaxFlushed, 3) + "%)";
  if (!finite) {
    out.broken("underflow", "underflow: the fp16 step left non-finite gradients and " +
                                std::string(h_scaled ? "the scaler let the step through" : "no GradScaler skipped it"));
  } else if (frac > kMaxFlushed) {
    out.broken("underflow", what);
  } else {
    out.held("underflow", what);
  }
}

// ---------------------------------------------------------------------------------------------
void accounting(const CheckContext& ctx, double w, Findings& out) {
  nlohmann::json& m = out.metrics();
  const int64_t interval = 3, steps = 12, inject = 4;
  AmpOptions o = amp_options(c10::kHalf, w);
  o.scaler.growth_interval = interval;
  Amp a = fresh(ctx, o);
  InfInjector injector(*a.probe, inject, steps);
  int64_t& now = injector.now;
  const bool& injected = injector.injected;
  const std::vector<bool>& finite_grads = injector.finite_grads;
  const bool has_scaler = a.probe->scaler_state().has_value();
  double sim = o.scaler.init_scale;
  int64_t tracker = 0, g = 0, s = 0;
  bool grew_after = false;
  nlohmann::json per_step = nlohmann::json::array();
  std::vector<std::string> bad;
  for (int64_t t = 0; t < steps; ++t) {
    now = t;
    const at::Tensor before = flat(a.run->parameters(), false);
    a.run->train_step();
    const at::Tensor after = flat(a.run->parameters(), false);
    const bool skipped = torch::equal(before, after);
    if (skipped) {
      sim *= o.scaler.backoff_factor;
      tracker = 0;
      ++s;
    } else if (++tracker == interval) {
      sim *= o.scaler.growth_factor;
      tracker = 0;
      ++g;
      if (t > inject) grew_after = true;
    }
    auto st = a.probe->scaler_state();
    per_step.push_back({{"step", t}, {"skipped", skipped}, {"scale", st ? nlohmann::json(st->scale) : nlohmann::json()},
                        {"expected_scale", sim}});
    if (t == inject && !injected) hook_not_called();
    if (has_scaler && t != inject && skipped != !finite_grads[static_cast<size_t>(t)] && bad.empty()) {
      bad.push_back("step " + std::to_string(t) + (skipped ? " was skipped though its gradients were all finite"
                                                           : " stepped though its gradients held inf or NaN"));
    }
    if (t == inject && !skipped) {
      const bool finite = torch::isfinite(after).all().item<bool>();
      bad.push_back("step " + std::to_string(t) + " had an inf injected into a gradient and the optimizer stepped" +
                    (finite ? "" : ": the parameters are now non-finite") +
                    (has_scaler ? "" : " (the recipe trains fp16 without an enabled GradScaler)"));
    }
    if (st && st->scale != sim && bad.empty()) {
      bad.push_back("after step " + std::to_string(t) + " the scale is " + sci(st->scale) + ", expected " + sci(sim) +
                    " = init*growth^" + std::to_string(g) + "*backoff^" + std::to_string(s));
    }
  }
  if (has_scaler && !grew_after && bad.empty()) {
    bad.push_back("the scale never grew in the " + std::to_string(steps - inject - 1) +
                  " steps after the skip (growth interval " + std::to_string(interval) + ")");
  }
  const double final_scale = has_scaler ? a.probe->scaler_state()->scale : 0.0;
  const double formula = o.scaler.init_scale * std::pow(o.scaler.growth_factor, g) * std::pow(o.scaler.backoff_factor, s);
  m["scaler_accounting"] = {{"growth_interval", interval}, {"inject_step", inject}, {"growths", g}, {"skips", s},
                            {"final_scale", has_scaler ? nlohmann::json(final_scale) : nlohmann::json()},
                            {"per_step", per_step}};
  if (!has_scaler && bad.empty()) bad.push_back("the recipe trains fp16 without an enabled GradScaler");
  if (!bad.empty()) {
    out.broken("scaler_accounting", "scaler accounting (fp16, inf injected at step " + std::to_string(inject) + ", growth interval " +
                       std::to_string(interval) + "): " + bad.front());
  } else {
    out.held("scaler_accounting", "scaler accounting: inf at step " + std::to_string(inject) + " -> step skipped, scale backed off; " +
                   std::to_string(g) + " growths, " + std::to_string(s) + " skip(s) in " + std::to_string(steps) +
                   " steps; scale " + sci(final_scale) + " == 2^16*2^" + std::to_string(g) + "*0.5^" +
                   std::to_string(s) + " = " + sci(formula) + " after every step");
  }
}

// The gradient the optimizer saw, against the relations clipping at max_norm must satisfy: the
// global norm min(||g||, max_norm), or each tensor's min(||g_i||, max_norm), g the raw gradient /
// the scale. The same relations at max_norm / scale prove clipping before unscale_; a gradient that
// fits none is recorded, not named.
void clipping(const CheckContext& ctx, double max_norm, Findings& out) {
  nlohmann::json& m = out.metrics();
  constexpr double kRelTol = 1e-3;
  Amp a = fresh(ctx, amp_options(c10::kHalf));
  at::Tensor raw;
  std::vector<double> raw_norms;
  a.probe->set_after_backward([&](const NamedTensors& ps) {
    raw = flat(ps, true);
    raw_norms = grad_norms(ps);
  });
  for (int64_t t = 0; t < 16; ++t) {
    auto st = a.probe->scaler_state();
    const double scale = st ? st->scale : 1.0;
    const at::Tensor before = flat(a.run->parameters(), false);
    a.run->train_step();
    if (torch::equal(before, flat(a.run->parameters(), false))) continue;  // skipped by the scaler
    if (!raw.defined()) hook_not_called();
    const double norm_g = l2(raw) / scale;
    const double norm_f = l2(flat(a.run->parameters(), true));
    const std::vector<double> seen = grad_norms(a.run->parameters());
    auto global_at = [&](double threshold) {
      const double want = norm_g > threshold ? threshold * norm_g / (norm_g + 1e-6) : norm_g;
      return std::abs(norm_f - want) <= kRelTol * want;
    };
    m["clipping"] = {{"step", t}, {"scale", scale}, {"max_norm", max_norm}, {"unscaled_grad_norm", norm_g},
                     {"grad_norm_seen_by_optimizer", norm_f}};
    const std::string what = "clipping (fp16, step " + std::to_string(t) + ", scale " + sci(scale) +
                             "): unscaled gradient norm " + fmt::sig(norm_g, 4) + ", asked max_norm " +
                             fmt::sig(max_norm, 4) + ", the optimizer saw norm " + sci(norm_f);
    if (global_at(max_norm)) {
      out.held("clip_after_unscale", what + (norm_g > max_norm ? " = the threshold asked for" : " (under the bound: left alone)"));
    } else if (per_tensor_clip(raw_norms, seen, scale, max_norm, kRelTol)) {
      out.held("clip_after_unscale", what + ": each tensor's gradient clipped to its norm " + fmt::sig(max_norm, 4) +
                                         " (per-parameter clipping) on the unscaled gradients");
    } else if (scale != 1.0 && (global_at(max_norm / scale) || per_tensor_clip(raw_norms, seen, scale, max_norm / scale, kRelTol))) {
      out.broken("clip_after_unscale", what + ": the clip threshold in effect was max_norm / scale = " +
                                           sci(max_norm / scale) + ", so the gradients were clipped while still scaled "
                                           "(before unscale_)");
    } else {
      out.recorded("clip_after_unscale", what + ": not judged: that is neither a clip at max_norm nor at max_norm / scale (" +
                                             sci(max_norm / scale) + "), of the global norm or of each tensor's; the "
                                             "recipe clips another way");
    }
    return;
  }
  out.broken("clip_after_unscale", "clipping (fp16): the scaler skipped all of 16 steps");
}

}  // namespace tc::amp
