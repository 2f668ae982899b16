#include "harness/rank_server.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "harness/child_process.h"
#include "harness/contract/scratch.h"
#include "harness/util/forking.h"
#include "harness/util/posix_fs.h"
#include "harness/util/termination.h"

namespace tc::rank_server {
namespace {

constexpr size_t kMaxRequest = 1 << 20;  // argv, environment and working directory of one rank

struct Rank {
  pid_t pid = -1;
  int conn = -1;  // -1 once the shim is gone
};

// The request's fields: the working directory, argc, argv..., then the environment's entries.
std::vector<std::string> split_fields(const char* p, size_t n) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != '\0') continue;
    out.emplace_back(p + start, i - start);
    start = i + 1;
  }
  return out;
}

// The forked rank: the shim's streams, working directory and environment, then main(argv).
[[noreturn]] void become_rank(RankMain rank_main, pid_t server, int listener, const std::vector<Rank>& ranks, int conn,
                              const int fds[3], const std::vector<std::string>& fields) {
  setpgid(0, 0);
  termination::forget_parents_registrations(server);  // dies with the template (SIGTERM)
  for (int i = 0; i < 3; ++i) dup2(fds[i], i);         // dup2 leaves the copies without FD_CLOEXEC
  for (int i = 0; i < 3; ++i) close(fds[i]);
  close(listener);
  close(conn);
  for (const Rank& r : ranks) {
    if (r.conn >= 0) close(r.conn);
  }
  const size_t argc = std::strtoul(fields[1].c_str(), nullptr, 10);
  if (chdir(fields[0].c_str()) != 0) {
    std::fprintf(stderr, "torchconform: the rank cannot enter %s: %s\n", fields[0].c_str(), std::strerror(errno));
    _exit(70);
  }
  clearenv();
  for (size_t i = 2 + argc; i < fields.size(); ++i) {
    const size_t eq = fields[i].find('=');
    if (eq == std::string::npos || eq == 0) continue;
    setenv(fields[i].substr(0, eq).c_str(), fields[i].c_str() + eq + 1, 1);
  }
  forking::environment_replaced();
  std::vector<std::string> args(fields.begin() + 2, fields.begin() + 2 + static_cast<std::ptrdiff_t>(argc));
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int rc = 70;
  try {
    rc = rank_main(static_cast<int>(argc), argv.data());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "torchconform: the rank failed: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "torchconform: the rank failed with a non-standard exception\n");
  }
  forking::recipe_process_end();  // what the runtimes' exit handlers, skipped by _exit, would have removed
  std::fflush(nullptr);
  _exit(rc);
}

// Reads one shim's request and forks its rank; false when the request is not one (the connection
// is closed then: the shim reports it).
bool accept_rank(RankMain rank_main, int listener, std::vector<Rank>& ranks, std::vector<char>& buf) {
  const int conn = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (conn < 0) return false;
  timeval wait{5, 0};  // the shim sends its request as soon as it is connected
  setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  iovec iov{buf.data(), buf.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t got = recvmsg(conn, &msg, MSG_CMSG_CLOEXEC);
  int fds[3] = {-1, -1, -1};
  int n_fds = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (n_fds < 3) {
        fds[n_fds++] = fd;
      } else {
        close(fd);
      }
    }
  }
  std::vector<std::string> fields;
  if (got > 0 && (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == 0) fields = split_fields(buf.data(), static_cast<size_t>(got));
  const bool valid = n_fds == 3 && fields.size() >= 3 &&
                     fields.size() >= 2 + std::strtoul(fields[1].c_str(), nullptr, 10) &&
                     std::strtoul(fields[1].c_str(), nullptr, 10) >= 1;
  if (valid) {
    const pid_t pid = forking::fork_with_hooks();
    if (pid == 0) become_rank(rank_main, getppid(), listener, ranks, conn, fds, fields);
    if (pid > 0) {
      setpgid(pid, pid);  // as the rank does: whichever runs first, the group exists before a kill
      termination::register_group(pid);
      ranks.push_back({pid, conn});
    }
  }
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
  if (!valid || ranks.empty() || ranks.back().conn != conn) {
    close(conn);
    return false;
  }
  return true;
}

// What the shim sent: a signal to pass on to the rank's group, or the end of the shim (SIGKILL).
void read_from_shim(Rank& r) {
  int sig = 0;
  const ssize_t got = recv(r.conn, &sig, sizeof sig, MSG_DONTWAIT);
  if (got == static_cast<ssize_t>(sizeof sig)) {
    if (sig > 0 && sig < NSIG) kill(-r.pid, sig);
    return;
  }
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
  kill(-r.pid, SIGKILL);  // the shim is gone (killed, or torchrun with it): so is its rank
  close(r.conn);
  r.conn = -1;
}

// The template's loop: ranks forked on request, signals passed on, each rank's end told to its shim.
int serve(RankMain rank_main, int listener) {
  signal(SIGPIPE, SIG_IGN);
  std::vector<Rank> ranks;
  std::vector<char> buf(kMaxRequest);
  for (;;) {
    std::vector<pollfd> polled{{listener, POLLIN, 0}};
    for (const Rank& r : ranks) {
      if (r.conn >= 0) polled.push_back({r.conn, POLLIN, 0});
    }
    const int ready = poll(polled.data(), polled.size(), 50);
    if (ready < 0 && errno != EINTR) return 70;
    for (size_t i = 1; ready > 0 && i < polled.size(); ++i) {
      if (polled[i].revents == 0) continue;
      for (Rank& r : ranks) {
        if (r.conn == polled[i].fd) read_from_shim(r);
      }
    }
    if (ready > 0 && (polled[0].revents & POLLIN) != 0) accept_rank(rank_main, listener, ranks, buf);
    for (;;) {
      int status = 0;
      const pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      for (auto it = ranks.begin(); it != ranks.end(); ++it) {
        if (it->pid != pid) continue;
        if (it->conn >= 0) {
          (void)send(it->conn, &status, sizeof status, MSG_NOSIGNAL);
          close(it->conn);
        }
        termination::unregister_group(pid);
        ranks.erase(it);
        break;
      }
    }
  }
}

struct Template {
  std::string socket;
  std::unique_ptr<Scratch> dir;
  std::unique_ptr<child::Process> process;  // ended (SIGTERM to its group) when this process ends
};

Template& the_template() {
  static Template t;
  return t;
}

}  // namespace

std::string shim_next_to(const std::string& executable) {
  const size_t slash = executable.rfind('/');
  if (slash == std::string::npos) return "";
  const std::string shim = executable.substr(0, slash + 1) + kShimName;
  return access(shim.c_str(), X_OK) == 0 ? shim : "";
}

std::string start(RankMain rank_main, const std::string& executable) {
  Template& t = the_template();
  if (t.process) {  // a second run in this process (a test calling cli_main again): the same template
    setenv(kSocketVar, t.socket.c_str(), 1);
    return "";
  }
  if (shim_next_to(executable).empty()) return std::string("no ") + kShimName + " beside " + executable;
  if (!forking::single_threaded()) return "this process has more than one thread";
  auto dir = std::make_unique<Scratch>("torchconform-ranks-");
  const std::string path = dir->file("socket");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return "the socket's path is too long: " + path;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int listener = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (listener < 0) return std::string("socket: ") + std::strerror(errno);
  if (bind(listener, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 || listen(listener, 64) != 0) {
    const std::string why = std::string("cannot listen on ") + path + ": " + std::strerror(errno);
    close(listener);
    return why;
  }
  child::Spec spec;
  spec.body = [rank_main, listener] { return serve(rank_main, listener); };
  spec.timeout = std::chrono::hours(24 * 365);
  spec.kill_grace = std::chrono::seconds(2);
  try {
    t.process = std::make_unique<child::Process>(spec);
  } catch (const std::exception& e) {
    close(listener);
    return e.what();
  }
  close(listener);  // the template's now: a recipe's process forked from this one has no copy
  setenv(kSocketVar, path.c_str(), 1);
  t.socket = path;
  t.dir = std::move(dir);
  return "";
}

std::vector<std::string> launcher_prefix(const std::string& device, const std::string& executable) {
  const char* socket = std::getenv(kSocketVar);
  if (socket == nullptr || *socket == '\0' || device != "cpu" || !posix_fs::exists(socket)) return {};
  const std::string shim = shim_next_to(executable);
  if (shim.empty()) return {};
  return {shim, socket};
}

}  // namespace tc::rank_server
