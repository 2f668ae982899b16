#include "reference/bounded_parse.h"

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>
#include <stdexcept>

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include "harness/util/forking.h"

namespace tc::ref {
namespace {

double env_number(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const double x = std::strtod(v, &end);
  if (*end != '\0' || !(x > 0) || !std::isfinite(x)) {
    throw std::runtime_error(std::string(name) + "='" + v + "' is not a positive number");
  }
  return x;
}

// The child's address space now, in bytes (/proc/self/statm's first field, in pages).
uint64_t address_space_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0;
  statm >> pages;
  return pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

bool out_of_memory_text(const std::string& s) {
  return s.find("can't allocate memory") != std::string::npos || s.find("bad_alloc") != std::string::npos ||
         s.find("out of memory") != std::string::npos;
}

// Reads `fd` until its writer closes it (true) or `seconds` pass (false).
bool read_until_closed(int fd, double seconds, std::string& out) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (r <= 0) continue;  // timeout slice or EINTR
    char buf[4096];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;  // the child closed its end: it has exited
    out.append(buf, static_cast<size_t>(n));
  }
}

// Exit statuses of the child.
constexpr int kParsed = 0, kThrew = 2, kNoMemory = 3;

}  // namespace

ParseLimits parse_limits() {
  ParseLimits l;
  l.memory_mib = static_cast<uint64_t>(env_number("TORCHCONFORM_PARSE_MEMORY_MB", static_cast<double>(l.memory_mib)));
  l.seconds = env_number("TORCHCONFORM_PARSE_SECONDS", l.seconds);
  return l;
}

void parse_in_child(const std::string& what, const ParseLimits& limits, const std::function<void()>& parse) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error(std::string("pipe failed: ") + std::strerror(errno));
  tc::forking::prepare_to_fork();
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    close(fds[0]);
    at::set_num_threads(1);  // the parent's thread pool does not survive fork
    struct rlimit rl {};
    rl.rlim_cur = rl.rlim_max = address_space_bytes() + limits.memory_mib * 1024ull * 1024ull;
    setrlimit(RLIMIT_AS, &rl);
    int status = kParsed;
    std::string message;
    try {
      parse();
    } catch (const std::bad_alloc&) {
      status = kNoMemory;
    } catch (const c10::Error& e) {
      message = e.what_without_backtrace();
      status = out_of_memory_text(message) ? kNoMemory : kThrew;
    } catch (const std::exception& e) {
      message = e.what();
      status = out_of_memory_text(message) ? kNoMemory : kThrew;
    }
    size_t off = 0;
    while (off < message.size()) {
      const ssize_t n = write(fds[1], message.data() + off, message.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    _exit(status);
  }
  close(fds[1]);
  std::string message;
  const bool timed_out = !read_until_closed(fds[0], limits.seconds, message);
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const std::string limit_text = "refused: reading " + what + " needs more than ";
  if (timed_out) {
    std::ostringstream s;
    s << limit_text << limits.seconds << " s (TORCHCONFORM_PARSE_SECONDS, run --parse-seconds); nothing was loaded";
    throw std::runtime_error(s.str());
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == kParsed) return;
  if (WIFEXITED(status) && WEXITSTATUS(status) == kThrew) throw std::runtime_error(message);
  if (WIFEXITED(status) && WEXITSTATUS(status) == kNoMemory) {
    throw std::runtime_error(limit_text + std::to_string(limits.memory_mib) +
                             " MiB of memory (TORCHCONFORM_PARSE_MEMORY_MB, run --parse-memory-mb); nothing was loaded");
  }
  if (WIFSIGNALED(status)) {
    throw std::runtime_error("refused: reading " + what + " killed the reader (signal " +
                             std::to_string(WTERMSIG(status)) + ", " + strsignal(WTERMSIG(status)) +
                             "; a memory limit of " + std::to_string(limits.memory_mib) +
                             " MiB applied); nothing was loaded");
  }
  throw std::runtime_error("refused: reading " + what + " ended with status " + std::to_string(status) +
                           "; nothing was loaded");
}

}  // namespace tc::ref
