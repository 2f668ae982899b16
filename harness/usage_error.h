// Bad usage or an environment that cannot do what was asked (an unknown flag value, a missing
// device, a file that is not a report): the command line prints the message and exits 2
// (harness/cli/common.h: guarded() is the one catch). One class for the core and the commands.
#pragma once

#include <stdexcept>

namespace tc {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tc
