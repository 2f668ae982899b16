// torchconform-rank SOCKET PROGRAM [ARG...]: what torchrun starts for each rank of a multi-process
// cell on the CPU (harness/rank_server.h). It hands the template listening on SOCKET this
// process's argv (PROGRAM and its arguments), environment, working directory, stdin, stdout and
// stderr; the template forks the rank. This process stays what torchrun watches: it passes on the
// signals it gets to the rank, and ends as the rank ended (its exit status, or killed by the same
// signal). Where the template cannot be reached it execs PROGRAM itself, as torchrun would have.
// No LibTorch, nothing of this project: it starts in a millisecond.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

int g_conn = -1;
constexpr int kPassed[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};  // passed on to the rank

void pass_on(int sig) {
  const int saved = errno;
  (void)send(g_conn, &sig, sizeof sig, MSG_NOSIGNAL);  // async-signal-safe
  errno = saved;
}

[[noreturn]] void exec_program(char** program, const char* why) {
  std::fprintf(stderr, "torchconform-rank: %s; starting %s by exec\n", why, program[0]);
  // The program starts as torchrun would have started it: default dispositions, nothing blocked (a
  // signal held meanwhile is delivered now, by its default action).
  signal(SIGPIPE, SIG_DFL);
  sigset_t passed;
  sigemptyset(&passed);
  for (int sig : kPassed) {
    signal(sig, SIG_DFL);
    sigaddset(&passed, sig);
  }
  sigprocmask(SIG_UNBLOCK, &passed, nullptr);
  execv(program[0], program);
  std::fprintf(stderr, "torchconform-rank: cannot start %s: %s\n", program[0], std::strerror(errno));
  _exit(127);
}

// The request: working directory, argc, argv..., environment, each NUL-terminated.
std::string request(int argc, char** program) {
  std::string r;
  char cwd[4096];
  if (getcwd(cwd, sizeof cwd) == nullptr) return "";
  r.append(cwd).push_back('\0');
  r.append(std::to_string(argc)).push_back('\0');
  for (int i = 0; i < argc; ++i) r.append(program[i]).push_back('\0');
  for (char** e = environ; *e != nullptr; ++e) r.append(*e).push_back('\0');
  return r;
}

bool send_request(const std::string& body) {
  iovec iov{const_cast<char*>(body.data()), body.size()};
  const int fds[3] = {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof fds);
  std::memcpy(CMSG_DATA(c), fds, sizeof fds);
  return sendmsg(g_conn, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(body.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: torchconform-rank SOCKET PROGRAM [ARG...] (started by torchrun for torchconform)\n");
    return 2;
  }
  // As a rank started by exec (harness/util/termination.h): it dies with the process that started it.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() == 1) return 128 + SIGTERM;
  char** program = argv + 2;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (std::strlen(argv[1]) >= sizeof addr.sun_path) exec_program(program, "the socket's path is too long");
  std::strcpy(addr.sun_path, argv[1]);
  g_conn = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (g_conn < 0 || connect(g_conn, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    exec_program(program, "no rank template listens on the socket");
  }
  // The signals to pass on are held until the request is sent (the template reads the request
  // first), then each reaches the rank.
  sigset_t passed, before;
  sigemptyset(&passed);
  for (int sig : kPassed) sigaddset(&passed, sig);
  const std::string body = request(argc - 2, program);
  if (body.empty()) exec_program(program, "cannot read the working directory");
  sigprocmask(SIG_BLOCK, &passed, &before);
  struct sigaction sa {};
  sa.sa_handler = pass_on;
  sigemptyset(&sa.sa_mask);
  for (int sig : kPassed) sigaction(sig, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  if (!send_request(body)) {  // one message or none (SOCK_SEQPACKET): the template got nothing
    const std::string why = std::string("cannot hand the rank to the template (") + std::strerror(errno) + ")";
    exec_program(program, why.c_str());
  }
  sigprocmask(SIG_SETMASK, &before, nullptr);
  int status = 0;
  for (;;) {
    const ssize_t got = recv(g_conn, &status, sizeof status, 0);
    if (got == static_cast<ssize_t>(sizeof status)) break;
    if (got < 0 && errno == EINTR) continue;
    std::fprintf(stderr, "torchconform-rank: the rank template ended before the rank did\n");
    return 70;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : SIGKILL;
  signal(sig, SIG_DFL);
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_UNBLOCK, &all, nullptr);
  raise(sig);
  return 128 + sig;
}
