// The amp check's throughput workload and its timing protocol (suites/amp/check.cpp calls it;
// bench_amp.cpp shares the workload's size and FLOP count).
//
// Workload: a transformer block (reference/transformer.h, at::scaled_dot_product_attention) sized
// per device so that its matmuls dominate the step: on the CPU a single-threaded fp32 step of
// about 50-65 ms on this project's build machine (batch 4 x 64 tokens, width 256, MLP 1024); on a
// CUDA GPU batch 32 x 512 tokens, width 1024, MLP 4096 (1.3 TFLOP per step).
//
// Protocol: one warm-up step each, then rounds of three steps on three copies of the workload:
// the reference's fp32 step, the reference's AMP step and the recipe's AMP step (through
// AmpProbe::amp_step_on), the order reversed every other round, so load on the machine hits all
// alike. A step's time is wall time on CUDA, and on the CPU (1 intra-op thread) the calling
// thread's CPU time, which other processes on the machine do not lengthen. Per round two ratios: procedure = t(reference AMP) / t(recipe AMP), speed-up = t(fp32) /
// t(recipe AMP). Each is judged on the median of its per-round ratios with a distribution-free 95%
// interval (harness/util/median_interval.h): pass when the lower end clears the bar, fail when the
// upper end is below it; from 6 rounds on, 2 more at a time while undecided and within the time
// budget; still undecided -> the cell is `error` ("too noisy to judge", with the figures).
#pragma once

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
ref::TransformerOptions transformer_options(const WorkloadSize& s);
// Matmul FLOPs of one training step of the block (forward, and backward twice the forward less
// the input gradient of the first layer, which the step does not compute); elementwise work,
// softmax and normalisation are not counted (model FLOPs, as MFU counts them).
double step_flops(const WorkloadSize& s);
// The block in fp32 on `device`, initialised from `seed`, with one fixed batch.
AmpWorkload make_workload(const WorkloadSize& s, const c10::Device& device, uint64_t seed);

// The CPU flags that decide whether a lower-precision dtype is accelerated (read from
// /proc/cpuinfo: amx_bf16, amx_tile, amx_fp16, avx512_bf16, avx512_fp16, avx512f).
std::vector<std::string> cpu_precision_flags();

// Judges (or records) the "throughput" and "amp_procedure_speed" promises for `dtype` into `out`.
// Returns "" when decided (or nothing to decide), else the "too noisy to judge" text with figures.
// `speedup_bar` > 0 replaces the bar read from the hardware (a test judging the speed-up promise
// on a machine where it is only recorded).
std::string throughput(const CheckContext& ctx, AmpProbe& recipe, c10::ScalarType dtype, Findings& out,
                       double speedup_bar = 0.0);

}  // namespace tc::amp
