// data_saturation's judgements apart from the measurements: the host-to-device copy (a test judges
// it with a probe that returns set timings; this machine may have no CUDA device) and the data wait
// (a test judges recorded attempts, from a quiet machine and from one whose cores other processes held).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "harness/contract/loader_probe.h"
#include "suites/support/kit.h"

namespace tc {

// The batch costs (x step time) that data_saturation accepts as sized: above 1.1, a single worker
// still waits 9% and a loop without workers 52%; below 1.45, two workers need at most 0.75 of a
// core between them (the read latency, 0.7 of the step, uses none). The rounds of extra work are
// sized from timings taken moments apart; on a machine whose other processes come and go, those can
// disagree (a sweep at load average 7-8 on 2 cores: 4 of its 5 false alarms had batches sized at
// 1.7-2.4 x the step, where two correct workers need 1.4 cores), so the cost is measured again and
// the rounds corrected until it lands in the band, or the data wait is not judged.
inline constexpr std::pair<double, double> kBatchCostBand{1.1, 1.45};
bool batch_cost_in_band(double batch_cost_s, double step_s);

// The simulated device's step on the CPU: `floor_s`, lengthened where the loader's hand-over of a
// ready batch (`handover_s`: its least wait per step with batches that cost nothing) would take more
// than a quarter of `bar` of it (a Python DataLoader's workers pickle each batch: a few ms). The
// hand-over is measured up to three times and the least kept; once a measurement leaves the step at
// its floor, a smaller one cannot change the step, and the measurements stop (a loader of threads
// in the recipe's own process hands over in microseconds: one measurement instead of three).
inline constexpr double kHandoverShareOfBar = 0.25;
double simulated_step_s(double handover_s, double floor_s, double bar);

// One measurement of the step loop with the recipe's loader.
struct WaitAttempt {
  double wait_s = 0.0;             // the loop blocked in the loader's next()
  double wall_s = 0.0;             // the measured steps
  double run_queue_delay_s = -1.0; // its threads' and child processes' run delay (run_queue.h); -1: unknown
  double training_thread_delay_s = -1.0;  // of which the step loop's own thread; -1: unknown
  std::string load_average = "unknown";
};

struct DataWaitVerdict {
  std::string status;  // "held", "broken" or "recorded" (not judged)
  std::string evidence;
  size_t best = 0;     // the attempt with the least wait fraction
  double best_fraction = 0.0;
  double unexplained_fraction = 0.0;  // the least, over the attempts, of (wait - run delay) / wall
};

// The "data_wait" promise: held when some attempt waited at most `bar` of its wall time. Otherwise
// the wait may be the machine's, not the loader's: while a worker (a thread other than the step
// loop's, or a worker process) waits for a CPU taken by another process, the loop's wait grows by
// at most that time (a late batch delays the later ones of that worker, and the loop with them, so
// it is waited for once), so (wait - the other threads' run delay) / wall bounds the loader's own
// wait fraction from below. The step loop's own thread is not credited: its queueing outside
// next() only lengthens the wall, and inside it is the loader's own work where batches are made on
// that thread (workers 0, the mistake itself; crediting it, workers_0 measured 15-20% left at load
// average 6 on 2 cores, 50% without); the one part it leaves uncredited, the loop's wake-up when a
// batch arrives, measured 10-40 ms over a whole 0.6 s attempt of correct loaders at that load, of
// which the wait was 0.1-0.7%. Broken when the bound exceeds the bar in every attempt; otherwise
// not judged: the machine was too busy to tell (`batch_vs_step` and `cores` only word the evidence).
DataWaitVerdict judge_data_wait(const std::vector<WaitAttempt>& attempts, double bar, const std::string& batch_vs_step,
                                unsigned cores);

// Whether the attempts so far decide the data wait, so that no more are made (up to the check's
// limit otherwise): one waited at most `bar` (held: contention only adds wait, a later attempt
// cannot undo it), or the last two in a row each leave more than twice the bar after the credit
// above. That bound is the loader's own wait from below in each attempt; the attempts after the
// first are there for what the run queue does not see (a wait it explains in one attempt and not in
// the next, a stretch the machine took from the whole process), and two bounds in a row at twice
// the bar leave a later attempt nothing to find that the first two did not: the loader falls short
// by more than the bar again. A bound between the bar and twice it, or one the run queue explains,
// asks for the next attempt, as before.
bool data_wait_decided(const std::vector<WaitAttempt>& attempts, double bar);

// The "async_copy" promise into `out`: the probe's copy of a 64 MiB batch held the host for less
// than half of its total time (an asynchronous copy returns after the launch).
void judge_async_copy(LoaderProbe& probe, Findings& out);

}  // namespace tc
