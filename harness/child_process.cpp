#include "harness/child_process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "harness/util/forking.h"
#include "harness/util/termination.h"

extern char** environ;

namespace tc::child {
namespace {

bool executable(const std::string& p) { return !p.empty() && access(p.c_str(), X_OK) == 0; }

int decode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// This process's environment with spec.env set over it, as "K=V" strings.
std::vector<std::string> environment_with(const std::vector<std::pair<std::string, std::string>>& extra) {
  std::map<std::string, std::string> merged;
  std::vector<std::string> order;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    const std::string k = kv.substr(0, eq);
    if (merged.emplace(k, eq == std::string::npos ? "" : kv.substr(eq + 1)).second) order.push_back(k);
  }
  for (const auto& [k, v] : extra) {
    if (merged.count(k) == 0) order.push_back(k);
    merged[k] = v;
  }
  std::vector<std::string> out;
  for (const std::string& k : order) out.push_back(k + "=" + merged[k]);
  return out;
}

std::vector<char*> pointers(const std::vector<std::string>& strings) {
  std::vector<char*> p;
  for (const std::string& s : strings) p.push_back(const_cast<char*>(s.c_str()));
  p.push_back(nullptr);
  return p;
}

}  // namespace

namespace {

// The child side of a Spec with a body: what posix_spawn's file actions and attributes do, then the
// body, then _exit (no atexit handler or static destructor of the parent's state runs twice).
[[noreturn]] void run_body_in_child(const Spec& spec, pid_t parent, const termination::ChildDirectories& dirs) {
  setpgid(0, 0);
  termination::forget_parents_registrations(parent);
  dirs.mirror_here();
  const int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (in >= 0) dup2(in, STDIN_FILENO);
  if (!spec.log_path.empty()) {
    const int out = open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (out >= 0) {
      dup2(out, STDOUT_FILENO);
      dup2(out, STDERR_FILENO);
    }
  }
  for (const auto& [k, v] : spec.env) setenv(k.c_str(), v.c_str(), 1);
  setenv("TORCHCONFORM_PARENT_PID", std::to_string(parent).c_str(), 1);
  int rc = 70;
  try {
    rc = spec.body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "torchconform: the forked process failed: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "torchconform: the forked process failed with a non-standard exception\n");
  }
  forking::recipe_process_end();  // what the runtimes' exit handlers, skipped by _exit, would have removed
  std::fflush(nullptr);
  _exit(rc);
}

}  // namespace

Process::Process(const Spec& spec)
    : timeout_(spec.timeout), kill_grace_(spec.kill_grace), dirs_(std::make_unique<termination::ChildDirectories>()) {
  if (spec.body) {
    if (!forking::single_threaded()) {
      throw std::runtime_error("cannot fork: this process has more than one thread (harness/util/forking.h)");
    }
    const pid_t parent = getpid();
    start_ = std::chrono::steady_clock::now();
    const pid_t pid = forking::fork_with_hooks();
    if (pid == 0) run_body_in_child(spec, parent, *dirs_);
    if (pid < 0) throw std::runtime_error(std::string("cannot fork: ") + std::strerror(errno));
    setpgid(pid, pid);  // as the child does: whichever runs first, the group exists before a kill
    pid_ = pid;
    termination::register_group(pid_);
    return;
  }
  if (spec.argv.empty()) throw std::invalid_argument("nothing to launch");
  // A torchconform child dies with this process (harness/util/termination.h).
  std::vector<std::pair<std::string, std::string>> extra = spec.env;
  extra.emplace_back("TORCHCONFORM_PARENT_PID", std::to_string(getpid()));
  if (dirs_->fd() >= 0) extra.emplace_back(termination::kChildDirectoriesVariable, dirs_->for_exec());
  const std::vector<std::string> env = environment_with(extra);
  std::vector<char*> args = pointers(spec.argv), envp = pointers(env);
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  // The same number, without close-on-exec (glibc clears it for a dup2 onto itself).
  if (dirs_->fd() >= 0) posix_spawn_file_actions_adddup2(&actions, dirs_->fd(), dirs_->fd());
  if (!spec.log_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                     0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  }
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  start_ = std::chrono::steady_clock::now();
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw std::runtime_error("cannot start '" + spec.argv[0] + "': " + std::strerror(rc));
  pid_ = pid;
  termination::register_group(pid_);
}

namespace {

// torchrun starts each worker in a session of its own, out of reach of a signal to torchrun's
// group: SIGTERM lets torchrun stop its workers (it sends them SIGTERM, and SIGKILL 30 s later);
// only when it has not exited after that is its group killed.
int terminate_group(pid_t pid, std::chrono::milliseconds grace) {
  kill(-pid, SIGTERM);
  int status = 0;
  const auto hard = std::chrono::steady_clock::now() + grace;
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() >= hard) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return status;
}

}  // namespace

Process::~Process() {
  if (!done_ && !reaped_ && pid_ > 0) terminate_group(pid_, kill_grace_);
  if (reaped_ && !done_) kill(-pid_, SIGKILL);
  if (pid_ > 0) termination::unregister_group(pid_);
  if (pid_ > 0) dirs_->remove_listed();
}

bool Process::finished() {
  if (done_ || reaped_) return true;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
  reaped_ = true;
  reaped_status_ = status;
  result_.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  return true;
}

Result Process::wait_until(std::chrono::steady_clock::time_point deadline) {
  if (done_) return result_;
  if (reaped_) {
    kill(-pid_, SIGKILL);
    termination::unregister_group(pid_);
    dirs_->remove_listed();
    done_ = true;
    result_.exit_code = decode(reaped_status_);
    result_.signal = WIFSIGNALED(reaped_status_) ? WTERMSIG(reaped_status_) : 0;
    return result_;
  }
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      result_.timed_out = true;
      status = terminate_group(pid_, kill_grace_);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(-pid_, SIGKILL);  // stragglers of the group (workers torchrun left behind)
  termination::unregister_group(pid_);
  dirs_->remove_listed();
  done_ = true;
  result_.exit_code = decode(status);
  result_.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  result_.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  return result_;
}

Result run(const Spec& spec) {
  Process p(spec);
  return p.wait();
}

std::string find_torchrun() {
  if (const char* e = std::getenv("TORCHCONFORM_TORCHRUN")) return executable(e) ? e : "";
#ifdef TC_TORCHRUN
  if (executable(TC_TORCHRUN)) return TC_TORCHRUN;
#endif
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    for (std::string dir; std::getline(ss, dir, ':');) {
      if (executable(dir + "/torchrun")) return dir + "/torchrun";
    }
  }
  return "";
}

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    throw std::runtime_error("cannot bind a port on 127.0.0.1");
  }
  const int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

std::string tail_of(const std::string& path, size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), {});
  return s.size() > bytes ? "..." + s.substr(s.size() - bytes) : s;
}

}  // namespace tc::child
