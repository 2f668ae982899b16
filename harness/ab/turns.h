// Turn-taking between `ab` and the two `bench` processes it runs side by side (`ab --pairing
// repetition`, harness/ab/ab_launch.cpp): both builds are started at once on the same benchmark, and each
// repetition of each waits for its turn, so that BASE's and NEW's repetitions alternate in the
// order `ab` draws and the two sides of a pair are measured within a fraction of a second of each
// other. A side that waits is blocked on a read, using no CPU.
//
// The channel is a directory with two named pipes: `go` (ab -> bench: a line "go" or "stop") and
// `done` (bench -> ab: a line "done" when the repetition's function has returned). ab holds both
// pipes open for reading and writing, so neither side's open blocks; when ab dies, bench's read of
// `go` sees the end of the pipe and stops instead of waiting for ever.
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace tc {

// ab's end of one side's channel: creates the pipes in `dir` (which must exist).
class TurnGiver {
 public:
  explicit TurnGiver(const std::string& dir);
  ~TurnGiver();
  TurnGiver(const TurnGiver&) = delete;
  TurnGiver& operator=(const TurnGiver&) = delete;

  // Gives one turn and waits for its "done". `alive` is asked every 100 ms: when it returns false
  // (the process ended) or `timeout` passes, throws std::runtime_error naming `what`.
  void give_turn(const std::function<bool()>& alive, std::chrono::milliseconds timeout, const std::string& what);
  // Tells the side to skip every repetition it has left (no "done" follows).
  void stop();

 private:
  void send(const char* line);
  int go_ = -1, done_ = -1;
  std::string buffer_;
};

// bench's end (`bench --ab-turns DIR`).
class TurnTaker {
 public:
  enum class Turn { kGo, kStop, kGone };
  explicit TurnTaker(const std::string& dir);  // throws std::runtime_error when the pipes cannot be opened
  ~TurnTaker();
  TurnTaker(const TurnTaker&) = delete;
  TurnTaker& operator=(const TurnTaker&) = delete;

  // Blocks until ab gives a turn (kGo), says stop (kStop, and every call after), or is gone (kGone).
  Turn wait();
  void done();

 private:
  int go_ = -1, done_ = -1;
  bool stopped_ = false;
};

}  // namespace tc
