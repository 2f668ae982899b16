// main() of the tc_suite_tests binary (it holds no test). The binary is also a torchconform
// command line (`tc_suite_tests run ...`, the global registry plus the tests' own recipes,
// suites/tests/test_recipes.h): a check that compares with a fresh process
// (CheckContext::in_fresh_process) starts the program it runs in again, and in these tests that is
// this binary.
#include <cstring>

#include <gtest/gtest.h>

#include "harness/cli.h"
#include "suites/tests/test_recipes.h"

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "run") == 0) {
    tc::testing_recipes::add_test_recipes(tc::Registry::global());
    return tc::cli_main(argc, argv);
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
