// Seconds that the threads of this process and of its child processes spent runnable but waiting
// for a CPU over a stretch of time (Linux's schedstat run delay), threads that start or end within
// the stretch included.
//
// Why: data_saturation's data wait grows when other processes take the cores that the loader's
// workers need. The workers are made for each measurement and gone before it ends (a Python
// DataLoader's are processes), so reading /proc/self/task before and after misses them: a monitor
// thread samples every thread and child process while the stretch lasts, and a thread that was not
// there at the start counts from zero (the kernel zeroes a new task's run delay).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>

namespace tc {

// The bookkeeping, apart from /proc: run delays (ns) by thread id, a baseline taken at the start.
class RunDelayLedger {
 public:
  void baseline(int64_t tid, double run_delay_ns) { first_[tid] = last_[tid] = run_delay_ns; }
  // A later sample: a thread absent from the baseline started within the stretch, from zero.
  void sample(int64_t tid, double run_delay_ns) {
    if (!first_.count(tid)) first_[tid] = 0.0;
    last_[tid] = run_delay_ns;
  }
  // Sum over every thread seen, of its last sample less its first (a thread that ended keeps the
  // last sample taken before it ended).
  double total_ns() const;
  // The same for one thread; 0 for a thread never seen.
  double of_thread_ns(int64_t tid) const;
  size_t threads() const { return last_.size(); }

 private:
  std::map<int64_t, double> first_, last_;
};

// Samples every thread of this process and of its child processes (one level: a DataLoader's
// worker processes) from its construction until stop().
class RunQueueMonitor {
 public:
  explicit RunQueueMonitor(std::chrono::milliseconds period = std::chrono::milliseconds(5));
  ~RunQueueMonitor();
  RunQueueMonitor(const RunQueueMonitor&) = delete;
  RunQueueMonitor& operator=(const RunQueueMonitor&) = delete;
  // Ends the stretch: the seconds of run delay summed over the threads seen, -1 where /proc gives none.
  double stop();
  // After stop(): the part of it that thread `tid` (gettid()) waited; -1 where /proc gives none.
  double of_thread(int64_t tid) const;
  // gettid() of the calling thread.
  static int64_t this_thread_id();

 private:
  void take(bool first);
  RunDelayLedger ledger_;
  std::mutex mu_;
  std::atomic<bool> stop_{false};
  bool available_ = false;
  double result_ = -1.0;
  std::thread sampler_;
};

}  // namespace tc
