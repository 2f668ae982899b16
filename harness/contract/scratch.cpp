#include "harness/contract/scratch.h"

#include <exception>

#include "harness/contract/registry.h"
#include "harness/util/posix_fs.h"
#include "harness/util/termination.h"

namespace tc {

Scratch::Scratch(const std::string& prefix) {
  try {
    path_ = posix_fs::make_temp_dir(prefix);
  } catch (const std::exception& e) {
    throw HarnessError(e.what());
  }
  termination::register_directory(path_.c_str());  // removed too when the process is stopped
}

Scratch::~Scratch() {
  posix_fs::remove_tree(path_);
  termination::unregister_directory(path_.c_str());
}

}  // namespace tc
