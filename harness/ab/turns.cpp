#include "harness/ab/turns.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace tc {
namespace {

std::string sys_error(const std::string& what) { return what + ": " + std::strerror(errno); }

void make_fifo(const std::string& path) {
  if (mkfifo(path.c_str(), 0600) != 0 && errno != EEXIST) throw std::runtime_error(sys_error("cannot create " + path));
}

void write_all(int fd, const char* text, const std::string& what) {
  size_t left = std::strlen(text);
  while (left > 0) {
    const ssize_t n = write(fd, text, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(sys_error(what));
    text += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace

TurnGiver::TurnGiver(const std::string& dir) {
  make_fifo(dir + "/go");
  make_fifo(dir + "/done");
  // Read-write opens do not wait for the other end (Linux), and keep the pipes open for bench.
  go_ = open((dir + "/go").c_str(), O_RDWR | O_CLOEXEC);
  done_ = open((dir + "/done").c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (go_ < 0 || done_ < 0) throw std::runtime_error(sys_error("cannot open the turn pipes in " + dir));
}

TurnGiver::~TurnGiver() {
  if (go_ >= 0) close(go_);
  if (done_ >= 0) close(done_);
}

void TurnGiver::send(const char* line) { write_all(go_, line, "cannot write to the turn pipe"); }

void TurnGiver::stop() { send("stop\n"); }

void TurnGiver::give_turn(const std::function<bool()>& alive, std::chrono::milliseconds timeout,
                          const std::string& what) {
  send("go\n");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      const std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      if (line == "done") return;
      throw std::runtime_error(what + " answered '" + line + "' instead of 'done'");
    }
    pollfd p{done_, POLLIN, 0};
    const int r = poll(&p, 1, 100);
    if (r < 0 && errno != EINTR) throw std::runtime_error(sys_error("poll on the turn pipe"));
    if (r > 0 && (p.revents & POLLIN)) {
      char buf[256];
      const ssize_t n = read(done_, buf, sizeof buf);
      if (n > 0) buffer_.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (!alive()) throw std::runtime_error(what + " ended during its turn");
    if (std::chrono::steady_clock::now() >= deadline) {
      std::ostringstream s;
      s << what << " did not finish its turn in " << static_cast<double>(timeout.count()) / 1000.0 << " s";
      throw std::runtime_error(s.str());
    }
  }
}

TurnTaker::TurnTaker(const std::string& dir) {
  go_ = open((dir + "/go").c_str(), O_RDONLY | O_CLOEXEC);
  done_ = open((dir + "/done").c_str(), O_WRONLY | O_CLOEXEC);
  if (go_ < 0 || done_ < 0) {
    throw std::runtime_error(sys_error("--ab-turns " + dir + ": cannot open its pipes go and done (made by `ab`)"));
  }
}

TurnTaker::~TurnTaker() {
  if (go_ >= 0) close(go_);
  if (done_ >= 0) close(done_);
}

TurnTaker::Turn TurnTaker::wait() {
  if (stopped_) return Turn::kStop;
  std::string line;
  for (;;) {
    char c = 0;
    const ssize_t n = read(go_, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Turn::kGone;
    if (c != '\n') {
      line += c;
      continue;
    }
    if (line == "go") return Turn::kGo;
    if (line == "stop") {
      stopped_ = true;
      return Turn::kStop;
    }
    line.clear();  // unknown: ignored
  }
}

void TurnTaker::done() { write_all(done_, "done\n", "cannot write to the turn pipe"); }

}  // namespace tc
