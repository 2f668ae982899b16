#include "harness/util/termination.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

namespace tc::termination {
namespace {

constexpr int kSlots = 256;
// Directories: each slot owns a strdup'ed path (never freed while registered, so the handler may
// read it); groups: the pgid, 0 when free.
std::atomic<char*> g_dirs[kSlots];
std::atomic<pid_t> g_groups[kSlots];

// One directory level, then recursion, with a fixed buffer on the stack (depth-limited).
void remove_at(int parent_fd, const char* name, int depth) {
  if (unlinkat(parent_fd, name, 0) == 0) return;
  if (depth > 16) return;
  const int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  alignas(8) char buf[4096];
  for (;;) {
    const long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      struct Entry {
        unsigned long long ino;
        long long off;
        unsigned short reclen;
        unsigned char type;
        char name[1];
      };
      const auto* e = reinterpret_cast<const Entry*>(buf + off);
      off += e->reclen;
      if (std::strcmp(e->name, ".") == 0 || std::strcmp(e->name, "..") == 0) continue;
      remove_at(fd, e->name, depth + 1);
    }
  }
  close(fd);
  unlinkat(parent_fd, name, AT_REMOVEDIR);
}

void on_termination(int sig) {
  for (auto& g : g_groups) {
    const pid_t pgid = g.load();
    if (pgid > 0) kill(-pgid, SIGKILL);
  }
  for (auto& d : g_dirs) {
    const char* path = d.load();
    if (path != nullptr) remove_tree_signal_safe(path);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

void remove_tree_signal_safe(const char* path) {
  if (path == nullptr || path[0] != '/') return;  // absolute paths only (scratch directories are)
  remove_at(AT_FDCWD, path, 0);
}

void install_termination_cleanup() {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  struct sigaction sa {};
  sa.sa_handler = on_termination;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &sa, nullptr);
}

void adopt_parent_death() {
  const char* v = std::getenv("TORCHCONFORM_PARENT_PID");
  if (v == nullptr || *v == '\0') return;
  // Whatever process started this one (a torchconform process, or torchrun for a rank): its death
  // ends this one. The variable is inherited further down (torchrun's workers), so the parent is
  // not always the process it names; an orphan already (reparented to init) exits at once.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() == 1) _exit(128 + SIGTERM);
}

void forget_parents_registrations(pid_t parent) {
  for (auto& d : g_dirs) d.store(nullptr);
  for (auto& g : g_groups) g.store(0);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) _exit(128 + SIGTERM);
}

void register_directory(const char* path) {
  char* copy = strdup(path);
  if (copy == nullptr) return;
  for (auto& d : g_dirs) {
    char* expected = nullptr;
    if (d.compare_exchange_strong(expected, copy)) return;
  }
  std::free(copy);
}

void unregister_directory(const char* path) {
  for (auto& d : g_dirs) {
    char* p = d.load();
    if (p != nullptr && std::strcmp(p, path) == 0 && d.compare_exchange_strong(p, nullptr)) {
      std::free(p);
      return;
    }
  }
}

void register_group(pid_t pgid) {
  for (auto& g : g_groups) {
    pid_t expected = 0;
    if (g.compare_exchange_strong(expected, pgid)) return;
  }
}

void unregister_group(pid_t pgid) {
  for (auto& g : g_groups) {
    pid_t p = pgid;
    if (g.compare_exchange_strong(p, 0)) return;
  }
}

}  // namespace tc::termination
