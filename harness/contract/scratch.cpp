#include "harness/contract/scratch.h"

#include <exception>

#include "harness/contract/registry.h"
#include "harness/util/posix_fs.h"

namespace tc {

Scratch::Scratch(const std::string& prefix) {
  try {
    path_ = posix_fs::make_temp_dir(prefix);
  } catch (const std::exception& e) {
    throw HarnessError(e.what());
  }
}

Scratch::~Scratch() { posix_fs::remove_tree(path_); }

}  // namespace tc
