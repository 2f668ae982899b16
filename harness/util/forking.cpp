#include "harness/util/forking.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "harness/util/posix_fs.h"

namespace tc::forking {
namespace {

struct Hooks {
  void (*before)() = nullptr;
  void (*in_parent)() = nullptr;
  void (*in_child)() = nullptr;
};
constexpr int kMaxHooks = 4;
Hooks g_hooks[kMaxHooks];
int g_count = 0;
struct WarmUp {
  void (*warm)() = nullptr;
  bool done = false;
};
WarmUp g_warm_ups[kMaxHooks];
int g_warm_count = 0;
void (*g_starts[kMaxHooks])() = {};
int g_start_count = 0;
void (*g_ends[kMaxHooks])() = {};
int g_end_count = 0;
pid_t g_started_in = 0;  // the process that ran the starts (0: none)
void (*g_refreshes[kMaxHooks])() = {};
int g_refresh_count = 0;

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25  // Linux 6.1 (older headers lack it; an older kernel answers EINVAL)
#endif
constexpr long kHugePage = 2L << 20;
constexpr long kRegrowKiB = 32L << 10;  // anonymous memory grown since the last pass: pass again
pid_t g_prepared_in = 0;
long g_prepared_anon_kib = 0;

// Collapses each anonymous private writable region (no file: the heap, a library's .bss) of at
// least 8 MiB whose pages are at least 90% resident: MiB collapsed.
long collapse_dense_regions() {
  FILE* f = std::fopen("/proc/self/smaps", "r");
  if (f == nullptr) return 0;
  struct Region {
    uintptr_t begin, end;
  };
  Region regions[64];
  int n = 0;
  char line[4096];  // a mapping's line holds its path: up to PATH_MAX
  uintptr_t begin = 0, end = 0;
  bool candidate = false;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    uintptr_t b = 0, e = 0;
    char perms[8] = {};
    unsigned long long offset = 0;
    char dev[16] = {};
    unsigned long inode = 0;
    if (std::sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s %llx %15s %lu", &b, &e, perms, &offset, dev, &inode) == 6) {
      begin = b;
      end = e;
      candidate = inode == 0 && std::strcmp(perms, "rw-p") == 0 && e - b >= static_cast<uintptr_t>(4 * kHugePage) &&
                  std::strstr(line, "[stack") == nullptr;
      continue;
    }
    long kib = 0;
    if (candidate && std::sscanf(line, "Anonymous: %ld kB", &kib) == 1) {
      candidate = false;
      if (static_cast<double>(kib) * 1024.0 >= 0.9 * static_cast<double>(end - begin) && n < 64) regions[n++] = {begin, end};
    }
  }
  std::fclose(f);
  long mib = 0;
  for (int i = 0; i < n; ++i) {
    const uintptr_t b = (regions[i].begin + kHugePage - 1) & ~static_cast<uintptr_t>(kHugePage - 1);
    const uintptr_t e = regions[i].end & ~static_cast<uintptr_t>(kHugePage - 1);
    if (e <= b) continue;
    // Fails with EINVAL before Linux 6.1 or where huge pages are refused (prctl, MADV_NOHUGEPAGE),
    // EAGAIN/ENOMEM where no 2 MiB page is free: the region stays as it is.
    if (madvise(reinterpret_cast<void*>(b), e - b, MADV_COLLAPSE) == 0) mib += static_cast<long>((e - b) >> 20);
  }
  return mib;
}

}  // namespace

long prepare_to_fork() {
  if (const char* v = std::getenv("TORCHCONFORM_FORK_HUGE_PAGES"); v != nullptr && std::strcmp(v, "0") == 0) return 0;
  const long kib = posix_fs::proc_kib("/proc/self/status", "RssAnon");
  if (kib < 0) return 0;
  if (g_prepared_in == getpid() && kib < g_prepared_anon_kib + kRegrowKiB) return 0;
  g_prepared_in = getpid();
  g_prepared_anon_kib = kib;
  return collapse_dense_regions();
}

bool single_threaded() {
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return false;  // cannot tell: not safe to assume
  int threads = 0;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++threads;
  }
  closedir(d);
  return threads == 1;
}

void add_hooks(void (*before)(), void (*in_parent)(), void (*in_child)()) {
  for (int i = 0; i < g_count; ++i) {
    if (g_hooks[i].before == before && g_hooks[i].in_parent == in_parent && g_hooks[i].in_child == in_child) return;
  }
  if (g_count < kMaxHooks) g_hooks[g_count++] = {before, in_parent, in_child};
}

void add_warm_up(void (*warm)()) {
  for (int i = 0; i < g_warm_count; ++i) {
    if (g_warm_ups[i].warm == warm) return;
  }
  if (g_warm_count < kMaxHooks) g_warm_ups[g_warm_count++] = {warm, false};
}

void warm_up() {
  for (int i = 0; i < g_warm_count; ++i) {
    if (g_warm_ups[i].done) continue;
    g_warm_ups[i].done = true;
    g_warm_ups[i].warm();
  }
}

void add_recipe_process_start(void (*start)()) {
  for (int i = 0; i < g_start_count; ++i) {
    if (g_starts[i] == start) return;
  }
  if (g_start_count < kMaxHooks) g_starts[g_start_count++] = start;
}

void recipe_process_start() {
  if (g_start_count == 0 || g_started_in == getpid() || !single_threaded()) return;
  g_started_in = getpid();
  for (int i = 0; i < g_start_count; ++i) g_starts[i]();
}

void add_recipe_process_end(void (*end)()) {
  for (int i = 0; i < g_end_count; ++i) {
    if (g_ends[i] == end) return;
  }
  if (g_end_count < kMaxHooks) g_ends[g_end_count++] = end;
}

void recipe_process_end() {
  for (int i = 0; i < g_end_count; ++i) g_ends[i]();
}

void add_environment_refresh(void (*refresh)()) {
  for (int i = 0; i < g_refresh_count; ++i) {
    if (g_refreshes[i] == refresh) return;
  }
  if (g_refresh_count < kMaxHooks) g_refreshes[g_refresh_count++] = refresh;
}

void environment_replaced() {
  // OpenMP's, when the program has it (LibTorch's libgomp): looked up, not linked, so that this
  // library stays without it.
  if (const char* v = std::getenv("OMP_NUM_THREADS"); v != nullptr && *v != '\0') {
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    using SetThreads = void (*)(int);
    if (*end == '\0' && n >= 1 && n <= 4096) {
      if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads")); set != nullptr) {
        set(static_cast<int>(n));
      }
    }
  }
  for (int i = 0; i < g_refresh_count; ++i) g_refreshes[i]();
}

pid_t fork_with_hooks() {
  prepare_to_fork();
  std::fflush(nullptr);  // nothing buffered in this process is written again by the child
  for (int i = 0; i < g_count; ++i) {
    if (g_hooks[i].before) g_hooks[i].before();
  }
  const pid_t pid = fork();
  const int saved = errno;
  // In the reverse order of `before`, as pthread_atfork runs its handlers.
  for (int i = g_count - 1; i >= 0; --i) {
    void (*hook)() = pid == 0 ? g_hooks[i].in_child : g_hooks[i].in_parent;
    if (hook) hook();
  }
  errno = saved;
  return pid;
}

}  // namespace tc::forking
