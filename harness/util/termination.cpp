#include "harness/util/termination.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>

namespace tc::termination {
namespace {

constexpr int kSlots = 256;
// Directories: each slot owns a strdup'ed path (never freed while registered, so the handler may
// read it); groups: the pgid, 0 when free.
std::atomic<char*> g_dirs[kSlots];
std::atomic<pid_t> g_groups[kSlots];

// The parent's table (ChildDirectories) this process mirrors g_dirs into, slot i at i * kSlotBytes;
// only in the process that called mirror_here() (g_mirror_pid), not in a fork of it.
constexpr size_t kSlotBytes = 1024;
std::atomic<char*> g_mirror{nullptr};
std::atomic<pid_t> g_mirror_pid{0};

char* mirror_slot(int i) {
  char* table = g_mirror.load();
  if (table == nullptr || g_mirror_pid.load() != getpid()) return nullptr;
  return table + static_cast<size_t>(i) * kSlotBytes;
}

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

namespace {

void mirror_into_starters_table() {
  const char* v = std::getenv(kChildDirectoriesVariable);
  if (v == nullptr) return;
  int fd = -1;
  long starter = 0;
  // Only the process its starter spawned (not torchrun's workers, which inherit the variable).
  if (std::sscanf(v, "%d:%ld", &fd, &starter) == 2 && fd >= 0 && starter == getppid()) {
    void* table = mmap(nullptr, kSlots * kSlotBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (table != MAP_FAILED) {
      g_mirror_pid.store(getpid());
      g_mirror.store(static_cast<char*>(table));
    }
    close(fd);
  }
  unsetenv(kChildDirectoriesVariable);
}

}  // namespace

void adopt_parent_death() {
  mirror_into_starters_table();
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
  g_mirror.store(nullptr);  // the parent's table stays its own
  for (auto& g : g_groups) g.store(0);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) _exit(128 + SIGTERM);
}

namespace {

void register_path(const char* path, bool mirror) {
  char* copy = strdup(path);
  if (copy == nullptr) return;
  const size_t length = std::strlen(copy);
  for (int i = 0; i < kSlots; ++i) {
    char* expected = nullptr;
    if (g_dirs[i].compare_exchange_strong(expected, copy)) {
      char* slot = mirror ? mirror_slot(i) : nullptr;
      if (slot != nullptr && length < kSlotBytes) {  // the first byte last: a slot half written is empty
        std::memcpy(slot + 1, copy + 1, length);
        std::atomic_signal_fence(std::memory_order_release);
        slot[0] = copy[0];
      }
      return;
    }
  }
  std::free(copy);
}

}  // namespace

void register_directory(const char* path) { register_path(path, true); }

void register_starting_process_directory(const char* path) { register_path(path, false); }

void unregister_directory(const char* path) {
  for (int i = 0; i < kSlots; ++i) {
    char* p = g_dirs[i].load();
    if (p != nullptr && std::strcmp(p, path) == 0 && g_dirs[i].compare_exchange_strong(p, nullptr)) {
      char* slot = mirror_slot(i);
      if (slot != nullptr) slot[0] = '\0';
      std::free(p);
      return;
    }
  }
}

ChildDirectories::ChildDirectories() {
  const int fd = memfd_create("torchconform-child-directories", MFD_CLOEXEC);
  if (fd < 0) return;
  void* table = ftruncate(fd, kSlots * kSlotBytes) == 0
                    ? mmap(nullptr, kSlots * kSlotBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                    : MAP_FAILED;
  if (table == MAP_FAILED) {
    close(fd);
    return;
  }
  fd_ = fd;
  table_ = static_cast<char*>(table);
}

ChildDirectories::~ChildDirectories() {
  if (table_ != nullptr) munmap(table_, kSlots * kSlotBytes);
  if (fd_ >= 0) close(fd_);
}

std::string ChildDirectories::for_exec() const {
  return fd_ < 0 ? std::string() : std::to_string(fd_) + ":" + std::to_string(getpid());
}

void ChildDirectories::mirror_here() const {
  g_mirror_pid.store(getpid());
  g_mirror.store(table_);
}

void ChildDirectories::remove_listed() const {
  if (table_ == nullptr) return;
  for (int i = 0; i < kSlots; ++i) {
    char* slot = table_ + static_cast<size_t>(i) * kSlotBytes;
    if (slot[0] == '\0') continue;
    remove_tree_signal_safe(slot);
    slot[0] = '\0';
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
