// What the runner's child-process launches share (harness/multi_process.cpp for torchrun cells,
// harness/fresh_process.cpp for a check's part in a fresh process): a scratch directory and the
// positive whole numbers users set through the environment.
#pragma once

#include <string>

namespace tc {

// A new directory $TMPDIR/<prefix>XXXXXX, removed with what it holds when the object goes; a
// HarnessError when none can be made.
class Scratch {
 public:
  explicit Scratch(const std::string& prefix);
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The environment variable `name` as a positive whole number; `fallback` when unset or empty; a
// HarnessError naming the variable and its value otherwise.
int env_positive_int(const char* name, int fallback);

}  // namespace tc
