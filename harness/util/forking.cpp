#include "harness/util/forking.h"

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

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
pid_t g_started_in = 0;  // the process that ran the starts (0: none)

}  // namespace

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

pid_t fork_with_hooks() {
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
