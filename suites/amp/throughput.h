// The amp check's throughput workload and its timing protocol (suites/amp/check.cpp calls it;
// bench_amp.cpp shares the workload's size and FLOP count).
//
// Workload: a transformer block (reference/transformer.h, at::scaled_dot_product_attention) sized
// per device so that its matmuls dominate the step: on the CPU a single-threaded fp32 step of
// about 50-65 ms on this project's build machine (batch 4 x 64 tokens, width 256, MLP 1024); on a
// CUDA GPU batch 32 x 512 tokens, width 1024, MLP 4096 (1.3 TFLOP per step). On a CPU whose
// narrower dtype's matmuls are slow, fewer tokens per sequence (fitted_seq below).
//
// Protocol: one warm-up each, then rounds that time six things on copies of the workload: the
// reference's fp32 and AMP steps, the recipe's own fp32 and AMP steps (AmpProbe::amp_step_on on an
// fp32 instance of the recipe and on one with mixed precision), and the block's matmuls alone in
// fp32 and in the dtype (the ceiling). The order is reversed every other round, so load on the
// machine hits all alike. A time is wall time on CUDA (synchronised), and on the CPU (1 intra-op
// thread) the calling thread's CPU time, which other processes on the machine do not lengthen.
// suites/amp/speed_judge.h judges both promises from those figures and says where each bar comes
// from. From 6 rounds on, 2 more at a time while undecided, up to a time budget (60 s CPU, 30 s
// CUDA); a promise still undecided is `recorded` with its interval and the reason, never an error.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "harness/contract/amp_probe.h"
#include "harness/contract/registry.h"
#include "reference/transformer.h"
#include "suites/support/kit.h"

namespace tc::amp {

struct WorkloadSize {
  int64_t batch = 4, seq = 64, dim = 256, heads = 4, ff = 1024, classes = 4;
};
WorkloadSize workload_size(const c10::Device& device);
// On the CPU the check fits the workload to the machine (throughput.cpp, fitted_workload): where
// one step's matmuls in the narrower dtype would take `dtype_matmuls_s` at `seq` tokens per
// sequence, the tokens are halved until they would take at most kDtypeStepTarget (twice the fp32
// step the CPU workload was sized for), down to kMinFittedSeq. Returns the tokens per sequence.
inline constexpr double kDtypeStepTarget = 0.12;
inline constexpr int64_t kMinFittedSeq = 8;
int64_t fitted_seq(int64_t seq, double dtype_matmuls_s);
ref::TransformerOptions transformer_options(const WorkloadSize& s);
// Matmul FLOPs of one training step of the block (forward, and backward twice the forward less
// the input gradient of the first layer, which the step does not compute); elementwise work,
// softmax and normalisation are not counted (model FLOPs, as MFU counts them).
double step_flops(const WorkloadSize& s);
// The block in fp32 on `device`, initialised from `seed`, with one fixed batch.
AmpWorkload make_workload(const WorkloadSize& s, const c10::Device& device, uint64_t seed);

// The CPU flags that name a lower-precision path (read from /proc/cpuinfo: amx_bf16, amx_tile,
// amx_fp16, avx512_bf16, avx512_fp16, avx512f): recorded beside the figures, never a bar.
std::vector<std::string> cpu_precision_flags();

// The block's own matmuls (forward, input and weight gradients, attention's batched products) on
// operands already in `dtype`: the work whose fp32 / dtype time ratio is the ceiling.
std::function<double()> matmuls_of(const WorkloadSize& s, const c10::Device& device, c10::ScalarType dtype,
                                   uint64_t seed);

// Judges (or records) the "throughput" and "amp_procedure_speed" promises for `dtype` into `out`:
// `recipe` has mixed precision on in `dtype`, `recipe_fp32` is the same recipe in fp32.
void throughput(const CheckContext& ctx, AmpProbe& recipe, AmpProbe& recipe_fp32, c10::ScalarType dtype,
                Findings& out);

}  // namespace tc::amp
