// amp: mixed precision is still right, and the GradScaler does its job.
//
// Drives the recipe through tc::AmpProbe (harness/contract/amp_probe.h): the check asks for mixed
// precision in a dtype; how the recipe does it is what is measured.
//
// 1. parity: N mixed-precision steps against N fp32 steps from the same start, run one after the
//    other (with a scaler: the start is the checkpoint taken once the scale has backed off, since
//    PyTorch's scaler skips overflowing steps by design while it calibrates; if it backs off again
//    within the N steps, the comparison starts over from there, 3 tries). Loss of each step and
//    the parameters' total update (the first step's gradient for an adaptive optimizer) within a
//    bound taken from the recipe's own step: r u + 2 s, u the dtype's unit roundoff (bf16 2^-8,
//    fp16 2^-11). r counts the roundings the step makes: each matmul-class kernel call of the
//    recipe's first mixed-precision step (observed, as engagement observes them) rounds its weight
//    operand and writes its output in the dtype, and the batch is rounded on entry: r = 2 calls + 1
//    (the reference CNN: 5 calls, r = 11; a 4-layer net: 10 calls, r = 21). Where the model
//    amplifies a rounding (cancelling reductions, ReLU or max-pool switching), the weights' roundings
//    cost more than u: s is measured on the recipe, as the largest relative change of its fp32
//    gradient (for the loss bound: of its loss) over the compared steps when its matmul weights are
//    rounded to the dtype before each step, from the same start (a switch happens on one step's
//    batch, not every one's); the activations' roundings may cost as much again: 2 s. The update
//    sums the steps', whose errors are each relative to their own step: the bound is multiplied by
//    kappa = (sum of the steps' update norms) / (net update norm) >= 1 (triangle inequality).
//    Precondition: the parameters stay fp32 (fp32_master_weights, below); a recipe that trains them
//    in the lower precision has no fp32 masters to compare, and parity is recorded, not judged.
// 1b. fp32_master_weights: after the mixed-precision steps every floating-point parameter is fp32.
// 2. underflow (fp16): with the loss weighted so the median fp32 gradient element is 2^-20, as
//    in a large model (fp16's smallest subnormal is 2^-24), the fraction of gradient elements that
//    are non-zero in fp32 but zero in what the mixed-precision optimizer saw, at most 0.1%. A scale
//    of 2^16 moves the flush point to 2^-40; without one, elements under 2^-24 are lost.
// 3. scaler accounting (fp16, growth interval 3): an inf injected into one gradient at step 4 must
//    leave the parameters untouched (step skipped) and back the scale off; three clean steps later
//    it must grow; after every step the scale equals init * growth^g * backoff^s, g and s counted
//    from the skips the check observes (parameters unchanged), as PyTorch's own tests assert.
// 4. clipping (fp16): on the first step the scaler lets through, the gradient the optimizer saw
//    has norm min(||g||, max_norm) within 1e-3 relative, g the raw gradient / the scale: the clip
//    threshold in effect is the one asked for (clipping before unscale_ gives max_norm / scale).
// 5. engagement (suites/amp/engagement.h): during one mixed-precision step of the recipe, every
//    matmul-class op (conv, linear, matmul, attention) ran in the dtype asked for; the evidence
//    names those that did not.
// 6. speed (suites/amp/throughput.h, judged by suites/amp/speed_judge.h), on a transformer block
//    sized to the device, to which the recipe applies its own procedure (AmpProbe::amp_step_on)
//    in fp32 and in the dtype: amp_procedure_speed, the recipe's speed-up over its own fp32 step at
//    least 0.8x the reference's over its own (every device); throughput, the AMP step saving at
//    least a quarter of the time this machine's matmuls would save in the dtype, or half the time
//    the reference's procedure saves where that is less, measured in the same rounds (recorded, not
//    judged, where neither shows a gain). No bar is keyed on CPU flags
//    or a GPU model. Interleaved rounds up to a time budget, median with a 95% interval; a promise
//    still undecided is recorded with its interval, never an error.
#include <algorithm>
#include <cmath>
#include <chrono>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include <torch/cuda.h>

#include <torch/torch.h>

#include "harness/contract/amp_probe.h"
#include "harness/contract/scratch.h"
#include "harness/util/text_format.h"
#include "reference/autocast.h"
#include "suites/amp/dtype.h"
#include "suites/amp/engagement.h"
#include "suites/amp/scaler.h"
#include "suites/amp/session.h"
#include "suites/amp/throughput.h"
#include "suites/support/fingerprint.h"
#include "suites/support/generators.h"
#include "suites/support/kit.h"
#include "suites/support/numbers.h"
#include "suites/support/optimizer_view.h"
#include "suites/support/tensor_compare.h"

namespace tc {
namespace {


using namespace amp;  // the session helpers (suites/amp/session.h)

// ---------------------------------------------------------------------------------------------
// The mixed-precision leg of parity: with a scaler, the steps it needs to calibrate (it skips
// overflowing steps by design), then `steps` compared from a checkpoint (`start`); if the scale still
// backs off during them, again from a checkpoint taken there (at most 3 times).
struct AmpLeg {
  bool scaled = false;
  int64_t warm = 0, skipped = 0;
  std::vector<double> losses;
  nlohmann::json scales = nlohmann::json::array();
  at::Tensor start, end;  // flat parameters where the compared steps began and ended
  at::Tensor first_grad;  // the first compared step's gradient, unscaled (flat; undefined: not seen)
  int64_t matmul_calls = 0;  // matmul-class kernel calls observed in the first compared step
};

AmpLeg amp_leg(Amp& a, int64_t steps, const std::string& start) {
  AmpLeg l;
  l.scaled = a.probe->scaler_state().has_value();
  if (l.scaled) {
    const double init = a.probe->scaler_state()->scale;
    while (l.warm < 16 && a.probe->scaler_state()->scale >= init) {
      a.run->train_step();
      ++l.warm;
    }
  }
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (l.scaled) a.run->save_checkpoint(start);
    l.start = flat(a.run->parameters(), false);
    l.losses.clear();
    l.scales = nlohmann::json::array();
    l.skipped = 0;
    GradientTap tap(*a.probe);
    for (int64_t i = 0; i < steps; ++i) {
      auto before = a.probe->scaler_state();
      if (i == 0) tap.arm(before ? before->scale : 1.0);
      std::optional<amp::MatmulDtypeObserver> observed;  // the first step's matmul-class calls
      if (i == 0) observed.emplace();
      l.losses.push_back(a.run->train_step().loss);
      if (observed) l.matmul_calls = observed->result().total;
      if (i == 0) l.first_grad = tap.grad();
      auto after = a.probe->scaler_state();
      if (after) l.scales.push_back(after->scale);
      if (before && after && after->scale < before->scale) ++l.skipped;
    }
    if (l.skipped == 0 || attempt == 2) break;
    l.warm += steps;
  }
  l.end = flat(a.run->parameters(), false);
  return l;
}

// The precondition: the fp32 run starts where the mixed-precision run did by the recipe's own
// means (with a scaler: its checkpoint; without: a fresh set-up with the same seed), so a second
// mixed-precision run started the same way must repeat the first bitwise (the same code twice).
// Returns what differs ("" when it repeats).
std::string second_leg_differs(const CheckContext& ctx, c10::ScalarType dtype, const AmpLeg& l, int64_t steps,
                               const std::string& start) {
  Amp b = fresh(ctx, amp_options(dtype));
  if (l.scaled) b.run->load_checkpoint(start);
  const at::Tensor b_start = flat(b.run->parameters(), false);
  std::vector<double> lb;
  for (int64_t i = 0; i < steps; ++i) lb.push_back(b.run->train_step().loss);
  const at::Tensor pb = flat(b.run->parameters(), false);
  if (b_start.sizes() != l.start.sizes() || !torch::equal(b_start, l.start)) {
    return "the parameters it starts from (max |diff| " +
           sci(b_start.sizes() == l.start.sizes() ? (b_start - l.start).abs().max().item<double>()
                                                  : std::numeric_limits<double>::infinity()) + ")";
  }
  if (auto i = first_difference(l.losses, lb)) return "the losses (" + describe_curve_difference(l.losses, lb, *i) + ")";
  if (pb.sizes() != l.end.sizes() || !torch::equal(pb, l.end)) return "the parameters after " + std::to_string(steps) + " steps";
  return "";
}

// The recipe's own amplification of the weights' rounding: alongside the fp32 leg, the same steps
// from the same start with every matmul weight rounded to `dtype` before each step (what autocast
// does to the weights of each matmul-class op; the fp32 masters are put back after the step), and
// the relative change of each step's gradient and loss against the fp32 leg's, the largest over the
// steps. Measured over every compared step, not the first alone: a ReLU or max-pool switch that a
// rounding makes happens on one step's batch and not another's (a pre-activation within a rounding
// of zero), and costs that step's gradient far more than u.
struct Sensitivity {
  double grad = 0.0, loss = 0.0;
  int64_t worst_step = 0;  // the step of the largest gradient change
};

// Rounds in place the parameters autocast casts for matmul-class ops (conv, linear: two dimensions
// and more; a norm layer's weight and bias stay fp32 under autocast) and returns what each lost, to
// be put back after the step; nullopt where a weight is out of the dtype's range (u is all one can say).
std::optional<std::vector<at::Tensor>> round_weights(Run& run, c10::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> lost;
  for (const auto& [name, p] : run.parameters()) {
    if (!p.is_floating_point() || p.dim() < 2) {
      lost.emplace_back();
      continue;
    }
    const at::Tensor rounded = p.to(dtype).to(p.scalar_type());
    if (!torch::isfinite(rounded).all().item<bool>()) return std::nullopt;
    lost.push_back(p - rounded);
    p.copy_(rounded);
  }
  return lost;
}

void put_back(Run& run, const std::vector<at::Tensor>& lost) {
  torch::NoGradGuard no_grad;
  const NamedTensors ps = run.parameters();
  for (size_t i = 0; i < ps.size() && i < lost.size(); ++i) {
    if (lost[i].defined()) ps[i].second.add_(lost[i]);
  }
}

// fp32 from the same start, and the verdict: loss and update within the recipe's bound, no step skipped.
// The fp32 leg from the mixed-precision leg's start: its losses, first gradient, the parameters at
// both ends and the length of the path the steps took (the sum of each step's update's norm).
struct Fp32Leg {
  std::vector<double> losses;
  at::Tensor first_grad, p0, pf;
  double path = 0.0;
  std::string adaptive;  // the optimizer's name where its update is not linear in the gradient
  Sensitivity sens;      // measured alongside, in the mixed-precision leg's dtype
};

// One step of the leg with the weights rounded (Sensitivity), against the fp32 step's gradient and loss.
void sensitivity_step(Amp& r, GradientTap& tap, c10::ScalarType dtype, int64_t i, const at::Tensor& g32, double loss32,
                      bool& in_range, Sensitivity& s) {
  if (!in_range) return;
  const std::optional<std::vector<at::Tensor>> lost = round_weights(*r.run, dtype);
  if (!lost) {
    in_range = false;
    s = {};
    return;
  }
  tap.arm(1.0);
  const double loss = r.run->train_step().loss;
  put_back(*r.run, *lost);
  const at::Tensor g = tap.grad();
  if (g.defined() && g32.defined() && g.numel() == g32.numel() && l2(g32) > 0) {
    const double rel = l2(g - g32) / l2(g32);
    if (rel > s.grad) s.grad = rel, s.worst_step = i;
  }
  s.loss = std::max(s.loss, std::abs(loss - loss32) / std::max(std::abs(loss32), 1e-30));
}

Fp32Leg fp32_leg(const CheckContext& ctx, c10::ScalarType dtype, const AmpLeg& l, int64_t steps, const std::string& start) {
  Fp32Leg g;
  Amp f = fresh(ctx, amp_options(c10::kFloat));
  Amp r = fresh(ctx, amp_options(c10::kFloat));  // the same steps with the weights rounded before each
  if (l.scaled) {
    f.run->load_checkpoint(start);
    r.run->load_checkpoint(start);
  }
  g.p0 = flat(f.run->parameters(), false);
  {
    GradientTap tap(*f.probe), rounded_tap(*r.probe);
    bool in_range = true;
    at::Tensor before = g.p0;
    const c10::DeviceType device = ctx.device == "cuda" ? c10::kCUDA : c10::kCPU;
    for (int64_t i = 0; i < steps; ++i) {
      // Both runs draw from the default generators: the rounded step draws what the fp32 step drew
      // (the same dropout masks), and the fp32 leg goes on as if it ran alone.
      const GeneratorStates at_step = save_generators(device);
      tap.arm(1.0);
      g.losses.push_back(f.run->train_step().loss);
      const at::Tensor grad = tap.grad();
      if (i == 0) g.first_grad = grad;
      const GeneratorStates after_step = save_generators(device);
      restore_generators(at_step);
      sensitivity_step(r, rounded_tap, dtype, i, grad, g.losses.back(), in_range, g.sens);
      restore_generators(after_step);
      at::Tensor after = flat(f.run->parameters(), false);
      g.path += l2(after - before);
      before = after;
    }
  }
  g.adaptive = element_normalising_optimizer(*f.run);
  g.pf = flat(f.run->parameters(), false);
  return g;
}

// How far the mixed-precision leg is from the fp32 one, and the bounds it is held to.
struct ParityMeasure {
  int64_t calls = 0, worst_step = 0;
  double roundings = 0, tol = 0, tol_loss = 0, kappa = 1, tol_update = 0;
  Sensitivity sens;
  bool have_grads = false;
  double grad_err = 0, worst_loss = 0, later_loss = 0, update_err = 0;
};

ParityMeasure measure_parity(const CheckContext& ctx, c10::ScalarType dtype, const AmpLeg& l, const Fp32Leg& g,
                             int64_t steps, const std::string& start) {
  ParityMeasure m;
  const double u = unit_roundoff(dtype);
  m.sens = g.sens;
  // The roundings a step makes: each matmul-class kernel call rounds its weight operand and writes
  // its output in the dtype (the next op's input), and the batch is rounded once on entry. On CUDA
  // the observer sees the forward only (autograd runs the backward on device threads): each
  // forward call has at most two backward products.
  m.calls = std::max<int64_t>(1, l.matmul_calls) * (ctx.device == "cuda" ? 3 : 1);
  m.roundings = static_cast<double>(2 * m.calls + 1);
  // Each rounding costs u where the model does not amplify it; the weights' roundings, measured on
  // the recipe's model as s, may cost more (cancelling reductions, ReLU and max-pool switching), and
  // the activations' roundings are allowed as much again: r u + 2 s.
  m.tol = m.roundings * u + 2.0 * m.sens.grad;
  m.tol_loss = m.roundings * u + 2.0 * m.sens.loss;
  m.have_grads = l.first_grad.defined() && g.first_grad.defined() && l.first_grad.numel() == g.first_grad.numel();
  const double grad_norm = m.have_grads ? l2(g.first_grad) : 0.0;
  m.grad_err = grad_norm > 0 ? l2(l.first_grad - g.first_grad) / grad_norm : std::numeric_limits<double>::infinity();
  // The losses judged: every step's where the update is linear in the gradient; with an optimizer
  // that normalises each element (its update, and so every later step's loss, is not bounded by the
  // gradient's rounding: an element of small gradient moves a whole step either way), the first
  // step's only, taken before any update. The later ones are recorded.
  const int64_t judged_losses = g.adaptive.empty() ? steps : std::min<int64_t>(steps, 1);
  for (int64_t i = 0; i < steps; ++i) {
    const double rel = std::abs(l.losses[i] - g.losses[i]) / std::max(std::abs(g.losses[i]), 1e-30);
    if (i >= judged_losses) {
      m.later_loss = std::max(m.later_loss, rel);
    } else if (!(rel <= m.worst_loss)) {
      m.worst_loss = rel;
      m.worst_step = i;
    }
  }
  const double update = l2(g.pf - g.p0);
  // The steps' updates partly cancel (momentum, weight decay, batches that pull different ways): each
  // step's error is relative to that step's update, so their sum is bounded relative to the net
  // update by the path's length over the net update (triangle inequality), kappa >= 1.
  m.kappa = update > 0 ? std::max(1.0, g.path / update) : 1.0;
  m.tol_update = m.tol * m.kappa;
  m.update_err = update > 0 ? l2(l.end - g.pf) / update : std::numeric_limits<double>::infinity();
  return m;
}

nlohmann::json parity_metrics(const AmpLeg& l, const Fp32Leg& g, const ParityMeasure& m, int64_t steps, double u) {
  nlohmann::json j = {{"steps", steps}, {"settling_steps", l.warm}, {"tolerance", m.tol},
                      {"tolerance_loss", m.tol_loss}, {"unit_roundoff", u},
                      {"tolerance_update", m.tol_update}, {"update_path_over_net", m.kappa},
                      {"matmul_calls", m.calls}, {"roundings", m.roundings},
                      {"rounding_sensitivity", {{"gradient", m.sens.grad}, {"loss", m.sens.loss},
                                                {"gradient_worst_step", m.sens.worst_step}}},
                      {"max_loss_rel_diff", m.worst_loss}, {"update_rel_err", m.update_err},
                      {"loss_amp", l.losses}, {"loss_fp32", g.losses}, {"scale_after_step", l.scales},
                      {"steps_skipped_by_scaler", l.skipped}, {"precondition_met", true},
                      // Each deviation over its bar (> 1 breaks parity): how clearly it held or broke.
                      {"loss_margin", m.worst_loss / m.tol_loss}, {"update_margin", m.update_err / m.tol_update}};
  if (m.have_grads) {
    j["first_gradient_rel_err"] = m.grad_err;
    j["gradient_margin"] = m.grad_err / m.tol;
  }
  if (!g.adaptive.empty()) {
    j["update_judged_through"] = "the first step's gradient (" + g.adaptive + ")";
    j["later_losses_rel_diff"] = m.later_loss;  // recorded, not judged
  }
  return j;
}

void judge_parity(const CheckContext& ctx, c10::ScalarType dtype, const AmpLeg& l, int64_t steps,
                  const std::string& start, Findings& out) {
  const double u = unit_roundoff(dtype);
  const std::string d = amp::dtype_name(dtype);
  const Fp32Leg g = fp32_leg(ctx, dtype, l, steps, start);
  const ParityMeasure m = measure_parity(ctx, dtype, l, g, steps, start);
  out.metrics()["parity_" + d] = parity_metrics(l, g, m, steps, u);
  const std::string what = d + " parity (" + std::to_string(steps) + " steps vs fp32" +
                           (l.scaled ? ", from the checkpoint after " + std::to_string(l.warm) +
                                           " steps that let the scaler calibrate" : "") +
                           ", tolerance r u + 2 s with r = " + fmt::sig(m.roundings, 3) + " roundings (2 per matmul-class call, " +
                           std::to_string(m.calls) + " calls, + 1 for the batch): " + sci(m.tol) + " (gradient), " +
                           sci(m.tol_loss) + " (loss), x " + fmt::sig(m.kappa, 3) + " for the update, whose steps' path is "
                           "that much longer than its net move; u = " + sci(u) + ", s measured on the recipe's model, its matmul weights "
                           "rounded before each of the steps: " + sci(m.sens.grad) + " (gradient, at step " +
                           std::to_string(m.sens.worst_step) + "), " + sci(m.sens.loss) + " (loss))";
  std::vector<std::string> bad;
  if (!(m.worst_loss <= m.tol_loss)) {
    bad.push_back("loss at step " + std::to_string(m.worst_step) + " differs by " + sci(m.worst_loss) + " relative (" +
                  fmt::sig(l.losses[m.worst_step]) + " vs " + fmt::sig(g.losses[m.worst_step]) + ")");
  }
  if (l.skipped > 0) {
    bad.push_back("the scaler still skipped " + std::to_string(l.skipped) + " of the compared steps after " +
                  std::to_string(l.warm) + " steps to calibrate");
  }
  std::string update_said = "update within " + sci(m.update_err);
  if (g.adaptive.empty() && !(m.update_err <= m.tol_update)) {
    bad.push_back("the parameters' update differs from fp32's by " + sci(m.update_err) +
                  " relative (|p_amp - p_fp32| / |p_fp32 - p_start|)");
  }
  if (!g.adaptive.empty()) {
    // The optimizer's update is not linear in the gradient: what precision changed is the gradient.
    if (!m.have_grads) hook_not_called();
    if (!(m.grad_err <= m.tol)) {
      bad.push_back("the first step's gradient differs from fp32's by " + sci(m.grad_err) +
                    " relative (||g_amp - g_fp32|| / ||g_fp32||, from the same parameters and batch)");
    }
    update_said = "first step's gradient within " + sci(m.grad_err) + " (" + g.adaptive +
                  " normalises each element, so its update, " + sci(m.update_err) +
                  " from fp32's, and the losses after the first step, which follow it (within " + sci(m.later_loss) +
                  "), are recorded, not judged)";
  }
  if (bad.empty()) {
    out.held("parity", what + ": " + (g.adaptive.empty() ? "loss" : "first step's loss") + " within " +
                           sci(m.worst_loss) + ", " + update_said);
  } else {
    out.broken("parity", what + ": " + fmt::first_items(bad, bad.size()));
  }
}

void parity(const CheckContext& ctx, c10::ScalarType dtype, Findings& out) {
  nlohmann::json& m = out.metrics();
  const int64_t steps = ctx.quick ? 4 : 6;
  Scratch scratch;
  const std::string start = scratch.file("settled.pt");
  const std::string d = amp::dtype_name(dtype);
  AmpLeg l;
  std::vector<std::string> lowered;  // parameters not in fp32 after the mixed-precision leg
  {
    Amp a = fresh(ctx, amp_options(dtype));
    l = amp_leg(a, steps, start);
    // What this environment computed in mixed precision, for `compare` (the first dtype's run: bf16
    // on the CPU, fp16 on CUDA): the steps compared, from where they started.
    if (!m.contains("fingerprint")) {
      m["fingerprint"] = training_fingerprint(
          d + " autocast run: " + std::to_string(steps) + " steps" +
              (l.scaled ? " after " + std::to_string(l.warm) + " that let the scaler calibrate" : "") + " (seed " +
              std::to_string(ctx.seed) + ")",
          l.losses, a.run->parameters());
    }
    for (const auto& [name, p] : a.run->parameters()) {
      if (p.is_floating_point() && p.scalar_type() != c10::kFloat) {
        lowered.push_back(name + " (" + amp::dtype_name(p.scalar_type()) + ")");
      }
    }
  }  // one run after the other, never interleaved: both draw dropout masks from the global generator
  // Autocast casts per op and leaves the parameters in fp32 (the master weights the optimizer
  // steps). Parameters left in the lower precision are trained in it: what parity measures against
  // fp32 masters is then another regime, so parity is not judged there.
  if (!lowered.empty()) {
    std::string names;
    for (size_t i = 0; i < lowered.size() && i < 4; ++i) names += (i ? ", " : "") + lowered[i];
    if (lowered.size() > 4) names += " and " + std::to_string(lowered.size() - 4) + " more";
    out.broken("fp32_master_weights", d + " mixed precision left " + std::to_string(lowered.size()) +
                                          " parameters in the lower precision after " + std::to_string(steps) +
                                          " steps: " + names + ": the optimizer steps them there, with no fp32 "
                                          "master weights (autocast casts per op and keeps the parameters fp32)");
    out.recorded("parity", d + " parity not judged: the parameters are not fp32 masters (fp32_master_weights)");
    return;
  }
  out.held("fp32_master_weights", d + ": every floating-point parameter is fp32 after " + std::to_string(steps) +
                                      " mixed-precision steps");
  // When the precondition fails, a parity failure would blame precision for a broken resume or an
  // unreproducible run: parity is recorded as not judged, naming the check that covers it.
  const std::string differs = second_leg_differs(ctx, dtype, l, steps, start);
  if (!differs.empty()) {
    const std::string how = l.scaled ? "save_checkpoint -> load_checkpoint (the " + d + " run's checkpoint after " +
                                           std::to_string(l.warm) + " steps) does not continue the run"
                                     : "two " + d + " runs set up with the same seed do not train alike";
    m["parity_" + d] = {{"judged", false}, {"precondition", l.scaled ? "checkpoint round trip" : "same-seed reproducibility"},
                        {"precondition_met", false}, {"differs", differs}};
    out.recorded("parity", d + " parity not judged: precondition not met: " + how + ": " + differs + " differ " +
                               "between two " + d + " runs started alike; " +
                               (l.scaled ? "resume_equality" : "reproducibility") + " covers this");
    return;
  }
  judge_parity(ctx, dtype, l, steps, start, out);
}

// The dtypes whose speed is measured: CPU bf16; CUDA fp16, and bf16 on compute capability >= 8.0
// (below it the cell records bf16 as not judged).
std::vector<c10::ScalarType> speed_dtypes(const CheckContext& ctx) {
  if (ctx.device == "cuda") return {c10::kHalf, c10::kBFloat16};
  return {c10::kBFloat16};
}

CheckResult check_amp(const CheckContext& ctx) {
  const bool cuda = ctx.device == "cuda";
  Findings f;
  double max_norm = 0.0;
  {
    Amp probe = fresh(ctx, amp_options(c10::kFloat));
    max_norm = probe.run->clip_norm();
  }
  const std::vector<c10::ScalarType> dtypes =
      cuda ? std::vector<c10::ScalarType>{c10::kHalf, c10::kBFloat16} : std::vector<c10::ScalarType>{c10::kBFloat16, c10::kHalf};
  for (auto t : dtypes) parity(ctx, t, f);
  std::set<c10::ScalarType> not_engaged;
  for (auto t : dtypes) {
    Amp e = fresh(ctx, amp_options(t));
    if (!amp::engagement(*e.run, t, ctx.device, f)) not_engaged.insert(t);
  }
  const double w = small_gradient_weight(ctx);
  underflow(ctx, w, f);
  accounting(ctx, w, f);
  if (max_norm > 0) clipping(ctx, max_norm, f);
  // The speed protocol costs 20-40 s a cell: a variant of another check's practice gets an amp
  // cell that is recorded, not judged, so its speed is not measured (the reference, a user's
  // recipe and amp's own variants are).
  if (ctx.role == Role::kVariant && ctx.expected == Expected::kAny) {
    const std::string why = "not measured: '" + ctx.recipe +
                            "' is a variant of another check's practice (its amp cell is recorded, "
                            "not judged)";
    f.recorded("amp_procedure_speed", why);
    f.recorded("throughput", why);
    return f.result();
  }
  // A variant of amp's own practice already caught by a promise above: its speed would not change
  // its verdict, and timing it costs 20-40 s (the reference, a user's recipe and an amp variant not
  // caught otherwise are timed).
  if (ctx.role == Role::kVariant && f.any_broken()) {
    const std::string why = "not measured: '" + ctx.recipe + "' already breaks a promise above (its speed would "
                            "not change the verdict)";
    f.recorded("amp_procedure_speed", why);
    f.recorded("throughput", why);
    return f.result();
  }
  for (auto t : speed_dtypes(ctx)) {
    if (not_engaged.count(t)) {
      // Its step ran in fp32: no mixed-precision procedure to time. Timed anyway, it would be
      // judged by the machine (fp32 against the reference's bf16 step: slower where bf16 is fast),
      // never by the recipe's procedure; engagement already names what is wrong.
      const std::string d = t == c10::kHalf ? "fp16" : "bf16";
      const std::string why = d + " AMP procedure speed: not judged: engagement is broken (the recipe's " + d +
                              " step ran its matmul-class ops in another dtype), so there is no " + d +
                              " procedure to time";
      f.recorded("amp_procedure_speed", why);
      f.recorded("throughput", d + " throughput: not judged: engagement is broken");
      continue;
    }
    Amp a = fresh(ctx, amp_options(t));
    Amp a32 = fresh(ctx, amp_options(c10::kFloat));
    amp::throughput(ctx, *a.probe, *a32.probe, t, f);
  }
  return f.result();
}

}  // namespace
}  // namespace tc

namespace tc {
TC_CHECK(amp,
         "mixed precision within r u + 2 s of fp32 (loss, update; r the step's roundings, 2 per matmul-class call, s the "
              "recipe's model's largest change over the steps when its weights are rounded); parameters stay fp32 masters; no fp16 gradient underflow; the "
              "GradScaler skips inf steps, backs off and grows; clipping acts on unscaled gradients; "
              "every matmul-class op of a mixed-precision step runs in the dtype asked for; on a transformer "
              "block the AMP step's speed-up over fp32 >= 0.8x the reference's, and its saving over fp32 >= a "
              "quarter of what this machine's matmuls would save in the dtype or half of what the reference's "
              "procedure saves, whichever is less, measured in the same run (recorded where neither gains)")
    ->Promise("parity", "mixed precision within r u + 2 s of fp32 (loss, update), from the recipe's own matmul-class calls and rounding sensitivity")
    // Not judged where the parameters are no fp32 masters (manual_half: fp32_master_weights' finding).
    ->NotJudged("parity", 1)
    ->Promise("fp32_master_weights", "the parameters stay fp32 under mixed precision (master weights; autocast casts per op)")
    ->Promise("underflow", "no fp16 gradient underflow")
    ->Promise("scaler_accounting", "the GradScaler skips inf steps, backs off and grows")
    ->Promise("clip_after_unscale", "clipping acts on unscaled gradients")
    ->Promise("engagement", "the matmul-class ops of a mixed-precision step run in the dtype asked for")
    ->TimingPromise("amp_procedure_speed",
                    "on a transformer block, the AMP step's speed-up over the recipe's own fp32 step at least 0.8x the reference's")
    ->TimingPromise("throughput",
                    "on a transformer block, the AMP step saves >= min(a quarter of what this machine's matmuls would "
                    "save in the dtype, half of what the reference's procedure saves), measured in the same run; "
                    "recorded where neither gains");
}  // namespace tc
