// A scratch directory for a check, a test or the harness: $TMPDIR/<prefix>XXXXXX, removed with what
// it holds when the object goes. Making none is the harness failing, not the recipe: HarnessError
// (verdict `error`). No torch here.
//
//   tc::Scratch scratch;                              // or Scratch("torchconform-amp-")
//   run->save_checkpoint(scratch.file("a.pt"));
#pragma once

#include <string>

namespace tc {

class Scratch {
 public:
  explicit Scratch(const std::string& prefix = "torchconform-");  // throws HarnessError
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace tc
