// The amp check's two timing promises judged from the seconds measured in interleaved rounds: plain
// arithmetic on figures (no LibTorch), so that recorded figures of machines this project does not
// have (suites/amp/fixtures/) run every branch on every CI (speed_judge_test.cpp).
//
// Each round times six things on the same machine, in the same process, at the transformer
// workload's shapes and thread count (suites/amp/throughput.h):
//   ref_fp32, ref_amp         the reference's fp32 step and its AMP step (SGD);
//   recipe_fp32, recipe_amp   the recipe's own fp32 step and its AMP step (its optimizer, its procedure);
//   gemm_fp32, gemm_amp       the block's own matmuls alone (forward, input and weight gradients,
//                             attention's batched products), operands already in fp32 / in the dtype.
//
// The bars, and where each comes from (docs/amp.md, "Bars from the machine"):
// - amp_procedure_speed: the recipe's AMP speed-up over its own fp32 step, S = recipe_fp32 /
//   recipe_amp, against the reference's over its own, S_ref = ref_fp32 / ref_amp: per round
//   S / S_ref, at least kProcedureBar (0.8). Like with like: an AdamW recipe's fp32 step carries
//   AdamW's cost as its AMP step does, so the optimizer cancels; only what mixed precision changed
//   is compared.
// - throughput: the ceiling is what this machine gives the block's matmuls in the dtype,
//   c = gemm_fp32 / gemm_amp, measured in the same rounds. With p = min(1, gemm_fp32 / recipe_fp32)
//   the matmuls' share of the recipe's fp32 step, the step speed-up mixed precision can attain if
//   only the matmuls get faster is A = 1 / ((1 - p) + p / c) (Amdahl): the matmuls would save the
//   share p (1 - 1/c) of the fp32 step. What correct mixed precision saves of it on this machine
//   is measured too: the reference's procedure saves (ref_fp32 - ref_amp) / recipe_fp32 of the
//   recipe's fp32 step (an absolute time, so that the recipe's optimizer, in both of its steps,
//   cancels). The promise asks the AMP step to save at least the smaller of kGainShare of what the
//   matmuls would save and kReferenceShare of what the reference's procedure saves:
//   1 - 1/S >= need = min(kGainShare p (1 - 1/c), kReferenceShare (ref_fp32 - ref_amp) / recipe_fp32),
//   i.e. S >= bar = 1 / (1 - need), judged per round as S / bar >= 1. The rest of the matmuls'
//   saving may go to what mixed precision must add (casts, the ops autocast keeps in fp32, its
//   bookkeeping), which no ceiling measures and which differs from machine to machine: on a Xeon
//   with AMX the reference saved 0.27 of what the matmuls would (docs/amp.md), so a bar of a
//   quarter of the matmuls' saving alone left correct recipes a margin of noise. Judged only where
//   the machine gives the dtype a gain (A's interval above kMinAttainable) and the reference's own
//   AMP step is faster than its fp32 step (S_ref's interval above 1); where either shows no gain,
//   the promise is recorded with the figures: no constant keyed on CPU flags or a GPU model
//   decides it, and a recipe is never asked to gain where correct code does not.
// Every figure is a median of per-round ratios with a distribution-free 95% interval
// (harness/util/median_interval.h): decided when the interval clears the bar on one side.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/util/median_interval.h"

namespace tc::amp {

// The AMP step must be at least this fraction of the reference's speed-up over fp32.
constexpr double kProcedureBar = 0.8;
// The share of the time the matmuls would save that the AMP step must save (docs/amp.md: the
// reference saved 0.6-0.8 of it on an avx512_bf16 EPYC, 5 runs; 0.27 on a Xeon with AMX).
constexpr double kGainShare = 0.25;
// ... unless correct mixed precision saves less here: then this share of the time the reference's
// procedure saves on the same workload and split (like amp_procedure_speed, a recipe may spend up
// to half of the saving on its own procedure; one that casts nothing saves nothing and is caught).
constexpr double kReferenceShare = 0.5;
// Below this attainable step speed-up the machine gives the dtype no gain worth judging.
constexpr double kMinAttainable = 1.1;

struct SpeedRounds {
  std::vector<double> ref_fp32, ref_amp, recipe_fp32, recipe_amp, gemm_fp32, gemm_amp;
  size_t size() const { return recipe_amp.size(); }
};
// {"ref_fp32_s": [...], "ref_amp_s": [...], "recipe_fp32_s": [...], "recipe_amp_s": [...],
//  "gemm_fp32_s": [...], "gemm_amp_s": [...]}; from_json throws std::runtime_error naming what is
// missing or uneven.
nlohmann::json to_json(const SpeedRounds& r);
SpeedRounds speed_rounds_from_json(const nlohmann::json& j);

enum class Ceiling { kGain, kNoGain, kUndecided };
const char* to_string(Ceiling c);

struct SpeedVerdict {
  stats::MedianInterval ceiling;            // gemm_fp32 / gemm_amp
  stats::MedianInterval matmul_share;       // p
  stats::MedianInterval attainable;         // A
  stats::MedianInterval speedup;            // S
  stats::MedianInterval reference_speedup;  // S_ref
  stats::MedianInterval procedure;          // S / S_ref
  stats::MedianInterval bar;                // 1 / (1 - need), need as above
  stats::MedianInterval reference_saving;   // (ref_fp32 - ref_amp) / recipe_fp32
  stats::MedianInterval against_bar;        // S / bar
  Ceiling ceiling_says = Ceiling::kUndecided;
  // Whether correct mixed precision (the reference's procedure) gains here: S_ref's interval above
  // 1 (gain), at or under it (no gain), or spanning it (undecided).
  Ceiling reference_says = Ceiling::kUndecided;
  stats::BarVerdict procedure_v = stats::BarVerdict::kUndecided;
  stats::BarVerdict throughput_v = stats::BarVerdict::kUndecided;  // only where throughput_judged()
  // The machine gives the dtype a gain and correct mixed precision takes one: throughput is judged.
  bool throughput_judged() const { return ceiling_says == Ceiling::kGain && reference_says == Ceiling::kGain; }
  // Both promises decided (throughput: judged and decided, or no gain to judge).
  bool decided() const;
};

SpeedVerdict judge_speed(const SpeedRounds& r);

// "1.23x (median of 12 rounds, 96.1% interval 1.2..1.26)"
std::string describe(const stats::MedianInterval& m);

}  // namespace tc::amp
