// Which files of a directory were written, and how often, between two drain() calls (inotify):
// what the multi-process checks count to tell "only rank 0 writes" from "every rank writes".
#pragma once

#include <map>
#include <string>

namespace tc {

// A rename onto a name counts as one write of it (an atomic save), and so does a write closed on a
// name never renamed away (an in-place save); temporary files renamed away are not counted.
class WriteWatch {
 public:
  explicit WriteWatch(const std::string& dir);  // throws HarnessError when inotify cannot watch it
  ~WriteWatch();
  WriteWatch(const WriteWatch&) = delete;
  WriteWatch& operator=(const WriteWatch&) = delete;

  // The writes since the previous call (or construction), by file name.
  std::map<std::string, int> drain();

 private:
  int fd_ = -1;
};

}  // namespace tc
