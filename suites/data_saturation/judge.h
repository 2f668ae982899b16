// data_saturation's judgement of the host-to-device copy, apart from a real CUDA copy: a test
// judges it with a probe that returns set timings (this machine may have no CUDA device).
#pragma once

#include "harness/contract/loader_probe.h"
#include "suites/support/kit.h"

namespace tc {

// The "async_copy" promise into `out`: the probe's copy of a 64 MiB batch held the host for less
// than half of its total time (an asynchronous copy returns after the launch).
void judge_async_copy(LoaderProbe& probe, Findings& out);

}  // namespace tc
