// A test binary that runs Python recipes in its own process ends as the program does, without
// finalizing its interpreter: after its last test it runs what a recipe's process runs when it ends
// (forking::recipe_process_end: multiprocessing's pymp-* directory removed, which stayed in the
// temporary folder otherwise). Included by one source file of each such binary.
#pragma once

#include <gtest/gtest.h>

#include "harness/util/forking.h"

namespace tc::test_support {

class EndOfProcess : public ::testing::Environment {
 public:
  void TearDown() override { forking::recipe_process_end(); }
};

inline ::testing::Environment* const kEndOfProcess = ::testing::AddGlobalTestEnvironment(new EndOfProcess);

}  // namespace tc::test_support
