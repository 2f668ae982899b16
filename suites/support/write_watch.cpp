#include "suites/support/write_watch.h"

#include <sys/inotify.h>
#include <unistd.h>

#include <set>

#include "harness/contract/registry.h"

namespace tc {

WriteWatch::WriteWatch(const std::string& dir) {
  fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd_ < 0 || inotify_add_watch(fd_, dir.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM) < 0) {
    if (fd_ >= 0) close(fd_);
    throw HarnessError("cannot watch '" + dir + "' with inotify");
  }
}

WriteWatch::~WriteWatch() { close(fd_); }

std::map<std::string, int> WriteWatch::drain() {
  std::map<std::string, int> moved_to, closed;
  std::set<std::string> moved_from;
  alignas(inotify_event) char buf[64 * 1024];
  for (;;) {
    const ssize_t n = read(fd_, buf, sizeof buf);
    if (n <= 0) break;
    for (ssize_t off = 0; off < n;) {
      const auto* e = reinterpret_cast<const inotify_event*>(buf + off);
      const std::string name = e->len ? std::string(e->name) : "";
      if (e->mask & IN_MOVED_TO) ++moved_to[name];
      if (e->mask & IN_CLOSE_WRITE) ++closed[name];
      if (e->mask & IN_MOVED_FROM) moved_from.insert(name);
      off += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
    }
  }
  std::map<std::string, int> writes = moved_to;
  for (const auto& [name, n] : closed) {
    if (!moved_from.count(name)) writes[name] += n;
  }
  return writes;
}

}  // namespace tc
