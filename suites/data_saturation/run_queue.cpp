#include "suites/data_saturation/run_queue.h"

#include <dirent.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace tc {

double RunDelayLedger::total_ns() const {
  double total = 0.0;
  for (const auto& [tid, last] : last_) {
    const double d = last - first_.at(tid);
    if (d > 0) total += d;
  }
  return total;
}

double RunDelayLedger::of_thread_ns(int64_t tid) const {
  const auto it = last_.find(tid);
  return it == last_.end() ? 0.0 : std::max(0.0, it->second - first_.at(tid));
}

namespace {

std::vector<std::string> entries(const std::string& dir_path) {
  std::vector<std::string> out;
  DIR* dir = opendir(dir_path.c_str());
  if (!dir) return out;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') out.emplace_back(e->d_name);
  }
  closedir(dir);
  return out;
}

// The second field of /proc/<pid>/task/<tid>/schedstat: ns spent runnable, waiting on a run queue.
template <class Visit>
void visit_tasks(const std::string& proc, Visit& visit) {
  for (const std::string& tid : entries(proc + "/task")) {
    std::ifstream f(proc + "/task/" + tid + "/schedstat");
    double on_cpu = 0, waiting = 0;
    if (f >> on_cpu >> waiting) visit(std::atoll(tid.c_str()), waiting);
  }
}

// Calls `visit(tid, run_delay_ns)` for every thread of this process and of its child processes;
// false where /proc/self/task cannot be read.
template <class Visit>
bool for_each_thread_run_delay(Visit&& visit) {
  const std::vector<std::string> own = entries("/proc/self/task");
  if (own.empty()) return false;
  visit_tasks(std::string("/proc/self"), visit);
  for (const std::string& tid : own) {
    std::ifstream f("/proc/self/task/" + tid + "/children");
    int64_t child = 0;
    while (f >> child) visit_tasks("/proc/" + std::to_string(child), visit);
  }
  return true;
}

}  // namespace

RunQueueMonitor::RunQueueMonitor(std::chrono::milliseconds period) {
  take(true);
  if (!available_) return;
  sampler_ = std::thread([this, period] {
    while (!stop_.load()) {
      std::this_thread::sleep_for(period);
      take(false);
    }
  });
}

RunQueueMonitor::~RunQueueMonitor() { stop(); }

void RunQueueMonitor::take(bool first) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool ok = for_each_thread_run_delay([&](int64_t tid, double ns) {
    if (first) {
      ledger_.baseline(tid, ns);
    } else {
      ledger_.sample(tid, ns);
    }
  });
  if (first) available_ = ok;
}

double RunQueueMonitor::stop() {
  if (sampler_.joinable()) {
    stop_.store(true);
    sampler_.join();
    take(false);
    result_ = ledger_.total_ns() * 1e-9;
  }
  return available_ ? result_ : -1.0;
}

double RunQueueMonitor::of_thread(int64_t tid) const {
  return available_ && !sampler_.joinable() ? ledger_.of_thread_ns(tid) * 1e-9 : -1.0;
}

int64_t RunQueueMonitor::this_thread_id() { return static_cast<int64_t>(syscall(SYS_gettid)); }

}  // namespace tc
