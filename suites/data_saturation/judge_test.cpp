// data_saturation's async_copy promise, judged with a probe that returns set timings: the real
// copy needs a CUDA device, the judgement does not. A call that returns after the launch holds,
// one that returns after the transfer breaks.
#include <stdexcept>

#include <gtest/gtest.h>

#include "suites/data_saturation/judge.h"

namespace tc {
namespace {

class TimedCopy : public LoaderProbe {
 public:
  explicit TimedCopy(CopyTiming t) : t_(t) {}
  DataWaitStats measure_data_wait(const LoaderProbeOptions&) override { throw std::logic_error("not used"); }
  std::vector<at::Tensor> worker_augmentations(int64_t) override { throw std::logic_error("not used"); }
  CopyTiming time_host_to_device_copy(int64_t bytes) override {
    EXPECT_EQ(bytes, int64_t{64} << 20);
    return t_;
  }

 private:
  CopyTiming t_;
};

std::string judged(CopyTiming t) {
  TimedCopy probe(t);
  Findings f;
  judge_async_copy(probe, f);
  const CheckResult r = f.result();
  return r.metrics["promises"].at(0)["status"].get<std::string>() + ": " + r.evidence;
}

TEST(DataSaturationAsyncCopy, ACallThatReturnsAfterTheLaunchHoldsOneThatWaitsForTheTransferBreaks) {
  // Pinned + non_blocking: 20 us in the call of a 5.2 ms copy (64 MiB at about 13 GB/s).
  const std::string async = judged({20e-6, 5.2e-3, true});
  EXPECT_EQ(async.rfind("held", 0), 0u) << async;
  EXPECT_NE(async.find("pinned"), std::string::npos) << async;
  // Pinned without non_blocking: the call returns when the transfer is done.
  const std::string sync = judged({5.1e-3, 5.2e-3, true});
  EXPECT_EQ(sync.rfind("broken", 0), 0u) << sync;
  EXPECT_NE(sync.find("the copy is synchronous"), std::string::npos) << sync;
  // Pageable memory: staged through a bounce buffer, synchronous whatever the flag.
  const std::string pageable = judged({9.0e-3, 9.5e-3, false});
  EXPECT_EQ(pageable.rfind("broken", 0), 0u) << pageable;
  EXPECT_NE(pageable.find("pageable"), std::string::npos) << pageable;
}

}  // namespace
}  // namespace tc
