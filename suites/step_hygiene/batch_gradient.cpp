// step_hygiene's batch_gradient (batch_gradient.h).
#include "suites/step_hygiene/batch_gradient.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include <torch/torch.h>

#include "harness/util/text_format.h"
#include "suites/support/tensor_compare.h"

namespace tc::step_hygiene {
namespace {

constexpr int64_t kMaxCompositions = 256;
// ln sqrt(2): the log-distance from a scale of 1 at which a whole factor (2, k, 1/k) is nearer.
const double kBoundary = 0.5 * std::log(2.0);



// The gradients of the batch's loss over micro-batches of `sizes` (in order, each loss weighed by
// its share of the batch), one per micro-batch, for the parameters `index` of `r`.
std::vector<std::vector<at::Tensor>> micro_batch_gradients(Run& r, const at::Tensor& x, const at::Tensor& y,
                                                           const std::vector<int64_t>& sizes,
                                                           const std::vector<size_t>& index) {
  const NamedTensors params = r.parameters();
  std::vector<at::Tensor> inputs;
  for (size_t i : index) inputs.push_back(params[i].second);
  std::vector<std::vector<at::Tensor>> parts;
  const int64_t batch = x.size(0);
  int64_t start = 0;
  for (const int64_t n : sizes) {
    const at::Tensor out = r.forward_train(n == batch ? x : x.narrow(0, start, n));
    at::Tensor loss = r.training_loss(out, n == batch ? y : y.narrow(0, start, n));
    if (n != batch) loss = loss * (static_cast<double>(n) / static_cast<double>(batch));
    const std::vector<at::Tensor> g = torch::autograd::grad({loss}, inputs, {}, false, false, /*allow_unused=*/true);
    std::vector<at::Tensor> part;
    for (const at::Tensor& t : g) part.push_back(t.defined() ? t.detach().cpu().to(torch::kDouble) : at::Tensor());
    parts.push_back(std::move(part));
    start += n;
  }
  return parts;
}

std::vector<at::Tensor> summed(const std::vector<std::vector<at::Tensor>>& parts) {
  std::vector<at::Tensor> sum(parts.empty() ? 0 : parts[0].size());
  for (const auto& part : parts) {
    for (size_t j = 0; j < part.size(); ++j) {
      if (part[j].defined()) sum[j] = sum[j].defined() ? sum[j] + part[j] : part[j];
    }
  }
  return sum;
}

double dot(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double s = 0.0;
  for (size_t j = 0; j < a.size() && j < b.size(); ++j) {
    if (a[j].defined() && b[j].defined()) s += (a[j] * b[j]).sum().item<double>();
  }
  return s;
}

// The cause of a scale, named only where the passes prove it.
std::string scale_cause(const BatchScale& b, const std::vector<std::vector<at::Tensor>>& passes) {
  bool same = b.passes > 1;
  for (size_t k = 1; same && k < passes.size(); ++k) {
    for (size_t i = 0; same && i < passes[k].size(); ++i) {
      const at::Tensor& a = passes[0][i];
      const at::Tensor& c = passes[k][i];
      if (a.defined() != c.defined() || (a.defined() && !torch::equal(a, c))) same = false;
    }
  }
  const std::string k = std::to_string(b.passes);
  if (same) {
    return "its " + k + " backward passes carried bitwise the same gradient: the same loss was backpropagated " + k +
           " times";
  }
  if (b.passes > 1 && std::abs(std::log(b.rho / static_cast<double>(b.passes))) < kBoundary) {
    return "the step had " + k + " backward passes and its gradient is about " + k +
           "x the batch's: each micro-batch's mean loss was backpropagated undivided (weigh each by its share of the "
           "batch, or divide by " + k + ")";
  }
  if (b.passes > 1 && std::abs(std::log(b.rho * static_cast<double>(b.passes))) < kBoundary) {
    return "the step had " + k + " backward passes and its gradient is about 1/" + k +
           " of the batch's: the micro-batch losses were divided twice";
  }
  return "the cause is not determined (" + k + " backward pass" + (b.passes == 1 ? "" : "es") + ")";
}

std::string split_text(const std::vector<int64_t>& sizes) {
  if (sizes.size() <= 1) return "the whole batch";
  std::string t;
  for (int64_t n : sizes) t += (t.empty() ? "" : " + ") + std::to_string(n);
  return "micro-batches " + t + " weighed by their share";
}

}  // namespace

// The splits a step of `k` backward passes may have made of a batch, the common ones first: k
// near-equal parts with the first ones larger (torch.tensor_split), parts of a fixed size m with a
// smaller last (torch.split(m), torch.chunk: every m that gives k parts), the whole batch (the same
// loss backpropagated k times); then, where there are at most kMaxCompositions of them, every other
// way to cut the batch into k contiguous parts (a split of the recipe's own, e.g. 4 + 8 + 4).
std::vector<std::vector<int64_t>> candidate_splits(int64_t batch, int64_t k) {
  std::vector<std::vector<int64_t>> out;
  auto add = [&out](const std::vector<int64_t>& sizes) {
    if (std::find(out.begin(), out.end(), sizes) == out.end()) out.push_back(sizes);
  };
  if (k > 1) {
    std::vector<int64_t> even;
    for (int64_t i = 0; i < k; ++i) even.push_back(batch / k + (i < batch % k ? 1 : 0));
    add(even);
    for (int64_t m = (batch + k - 1) / k; m < batch; ++m) {
      std::vector<int64_t> fixed;
      for (int64_t left = batch; left > 0; left -= m) fixed.push_back(std::min(m, left));
      if (static_cast<int64_t>(fixed.size()) == k) add(fixed);
      if (static_cast<int64_t>(fixed.size()) < k) break;
    }
  }
  add({batch});
  // C(batch - 1, k - 1) compositions, counted without overflow.
  double compositions = 1.0;
  for (int64_t i = 1; i < k && compositions <= kMaxCompositions; ++i) {
    compositions = compositions * static_cast<double>(batch - i) / static_cast<double>(i);
  }
  if (k > 1 && compositions <= kMaxCompositions) {
    std::vector<int64_t> sizes(k, 1);
    sizes[k - 1] = batch - (k - 1);
    // Every composition in turn: the odometer over the first k - 1 sizes, the last takes the rest.
    std::function<void(int64_t, int64_t)> fill = [&](int64_t at, int64_t left) {
      if (at == k - 1) {
        sizes[at] = left;
        add(sizes);
        return;
      }
      for (int64_t n = 1; n <= left - (k - 1 - at); ++n) {
        sizes[at] = n;
        fill(at + 1, left - n);
      }
    };
    fill(0, batch);
  }
  return out;
}

namespace {

// Each split the step may have made, from the step's generator states and buffers: the first whose
// passes each point their micro-batch's way to the precision of the computation drew the step's own
// masks (then no spread of draws enters the scale); else the first split, judged against its spread.
// `ref` gets that split's recomputed gradient, `other` one with other draws.
void find_split(Run& r, const at::Tensor& x, const at::Tensor& y, const std::vector<size_t>& index,
                const std::vector<std::vector<at::Tensor>>& passes, const GeneratorStates& gen, BatchScale& b,
                std::vector<at::Tensor>& ref, std::vector<at::Tensor>& other) {
  const NamedTensors buffers = r.buffers(), buffers_at = snapshot(buffers);
  for (const std::vector<int64_t>& sizes : candidate_splits(x.size(0), b.passes)) {
    {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < buffers.size(); ++i) buffers[i].second.copy_(buffers_at[i].second);
    }
    restore_generators(gen);
    const std::vector<std::vector<at::Tensor>> parts = micro_batch_gradients(r, x, y, sizes, index);
    // The same draws: each backward pass points the way of its micro-batch's recomputed gradient (of
    // the whole batch's, when the split is the whole batch), whatever weight the recipe gave it.
    bool same = true;
    for (size_t k = 0; same && k < passes.size(); ++k) {
      const std::vector<at::Tensor>& part = parts[parts.size() == 1 ? 0 : k];
      const double pp = dot(part, part), qq = dot(passes[k], passes[k]);
      same = pp > 0 && qq > 0 && dot(passes[k], part) / std::sqrt(pp * qq) > 1.0 - 1e-6;
    }
    if (ref.empty() || same) {
      ref = summed(parts);
      b.split = sizes;
      other = summed(micro_batch_gradients(r, x, y, sizes, index));  // other draws
    }
    if (same) {
      b.same_draws = true;
      break;
    }
  }
}

// No split drew the step's own masks (the recipe drew random numbers before its forward, on the
// training thread): the step's gradient is one draw g of the batch's gradient over the random
// draws, whose expectation mu is estimated from kDraws recomputations g_1..g_M, their mean m.
// <g, m> estimates rho |mu|^2 (g independent of the g_i), and |m|^2 overestimates |mu|^2 by
// tr(Sigma) / M, estimated from the draws' spread: |mu|^2 ~ |m|^2 - s^2 / M with
// s^2 = sum |g_i - m|^2 / (M - 1). The spread of the estimate: the scale of a further draw, held
// out of m, the farther from 1 of two. False (b.not_judged says why) when no mean stands out.
bool scale_over_draws(Run& r, const at::Tensor& x, const at::Tensor& y, const std::vector<size_t>& index,
                      const std::vector<at::Tensor>& step, const std::vector<at::Tensor>& ref,
                      const std::vector<at::Tensor>& other, BatchScale& b) {
  constexpr int kDraws = 8;
  std::vector<std::vector<at::Tensor>> draws{ref, other};
  while (static_cast<int>(draws.size()) < kDraws + 2) draws.push_back(summed(micro_batch_gradients(r, x, y, b.split, index)));
  std::vector<at::Tensor> m = draws[0];
  for (int i = 1; i < kDraws; ++i) {
    for (size_t j = 0; j < m.size(); ++j) {
      if (m[j].defined() && draws[static_cast<size_t>(i)][j].defined()) m[j] = m[j] + draws[static_cast<size_t>(i)][j];
    }
  }
  for (at::Tensor& t : m) {
    if (t.defined()) t = t / static_cast<double>(kDraws);
  }
  double spread = 0.0;
  for (int i = 0; i < kDraws; ++i) {
    const std::vector<at::Tensor>& g = draws[static_cast<size_t>(i)];
    spread += dot(g, g) - 2.0 * dot(g, m) + dot(m, m);
  }
  const double mu2 = dot(m, m) - spread / (kDraws - 1) / kDraws;
  if (!(mu2 > 0) || !std::isfinite(mu2)) {
    b.not_judged = "the batch's gradient over " + std::to_string(kDraws) +
                   " recomputations with other random draws has no mean distinguishable from their spread";
    return false;
  }
  b.rho = dot(step, m) / mu2;
  const double h1 = dot(draws[kDraws], m) / mu2, h2 = dot(draws[kDraws + 1], m) / mu2;
  b.rho_noise = std::abs(std::log(std::max(h1, 1e-30))) > std::abs(std::log(std::max(h2, 1e-30))) ? h1 : h2;
  b.cosine = dot(step, m) / std::sqrt(dot(step, step) * dot(m, m));
  b.mean_of_draws = kDraws;
  return true;
}

}  // namespace

BatchScale measure_batch_scale(const CheckContext& ctx, const RunOptions& opts, const std::string& before,
                               const std::vector<at::Tensor>& fresh,
                               const std::vector<std::vector<at::Tensor>>& step_passes, const GeneratorStates& gen,
                               Run& run) {
  BatchScale b;
  b.passes = static_cast<int64_t>(step_passes.size());
  std::vector<size_t> index;
  std::vector<at::Tensor> step;
  for (size_t i = 0; i < fresh.size(); ++i) {
    if (!fresh[i].defined()) continue;
    index.push_back(i);
    step.push_back(fresh[i].to(torch::kDouble));
  }
  if (index.empty() || b.passes == 0) {
    b.not_judged = "the step ran no backward pass the hooks saw";
    return b;
  }
  const auto [x, y] = run.last_batch();
  if (x.size(0) < b.passes) {
    b.not_judged = std::to_string(b.passes) + " backward passes for a batch of " + std::to_string(x.size(0));
    return b;
  }
  std::unique_ptr<Run> r = fresh_run(ctx, opts);
  r->load_checkpoint(before);
  // The step's passes, on the parameters judged: pass k's gradient of each (double).
  std::vector<std::vector<at::Tensor>> passes;
  for (const auto& pass : step_passes) {
    std::vector<at::Tensor> p;
    for (size_t i : index) p.push_back(i < pass.size() && pass[i].defined() ? pass[i].to(torch::kDouble) : at::Tensor());
    passes.push_back(std::move(p));
  }
  std::vector<at::Tensor> ref, other;
  find_split(*r, x, y, index, passes, gen, b, ref, other);
  const double rr = dot(ref, ref);
  if (!(rr > 0) || !std::isfinite(rr)) {
    b.not_judged = "the recomputed gradient of the batch's loss is zero or not finite";
    return b;
  }
  b.rho = dot(step, ref) / rr;
  b.rho_noise = dot(other, ref) / rr;
  b.cosine = dot(step, ref) / std::sqrt(dot(step, step) * rr);
  if (!b.same_draws && !scale_over_draws(*r, x, y, index, step, ref, other, b)) return b;
  if (!b.same_draws && !(std::abs(std::log(std::max(b.rho_noise, 1e-30))) < kBoundary / 2)) {
    b.not_judged = "a recomputation from other generator states (other dropout masks) gives a scale of " +
                   fmt::sig(b.rho_noise, 3) + " along the mean of " + std::to_string(b.mean_of_draws) +
                   " others, outside 2^(+-1/4): the batch's gradient varies too much with its random draws to "
                   "judge the step's scale";
  } else if (!(b.cosine > 0.5)) {
    b.not_judged = "the step's gradient and the recomputed one point different ways (cosine " + fmt::sig(b.cosine, 3) +
                   "), so a scale between them means nothing";
  }
  return b;
}

void judge_batch_scale(const BatchScale& b, const std::vector<std::vector<at::Tensor>>& passes, Findings& f) {
  f.metrics()["batch_gradient"] = {{"step", 0}, {"backward_passes", b.passes}, {"scale", b.rho},
                                   {"scale_other_draws", b.rho_noise}, {"cosine", b.cosine},
                                   {"same_draws", b.same_draws}, {"split", b.split},
                                   {"mean_of_draws", b.mean_of_draws},
                                   {"judged", b.not_judged.empty()}};
  if (!b.not_judged.empty()) {
    f.recorded(kBatchGradient, "not judged: step 0: " + b.not_judged);
    return;
  }
  const std::string what = "step 0: the gradient of its " + std::to_string(b.passes) + " backward pass" +
                           (b.passes == 1 ? "" : "es") + " is " + fmt::sig(b.rho, 4) +
                           "x the gradient of the batch's loss recomputed over " + split_text(b.split) +
                           " along it (cosine " + fmt::sig(b.cosine, 9) + ", " +
                           (b.same_draws ? std::string("the step's own random draws")
                                         : "the mean over " + std::to_string(b.mean_of_draws) +
                                               " recomputations with other random draws than the step's, its "
                                               "length corrected for their spread; a further draw: " +
                                               fmt::sig(b.rho_noise, 4) + "x") +
                           "; bounds 2^(+-1/2))";
  const double deviation = std::abs(std::log(b.rho));
  if (deviation < kBoundary) {
    f.held(kBatchGradient, what, deviation, kBoundary);
  } else {
    f.broken(kBatchGradient, what + ": " + scale_cause(b, passes), deviation, kBoundary);
  }
}


}  // namespace tc::step_hygiene
