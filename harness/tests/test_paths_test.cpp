// The paths the tests find the trees by (harness/testing/test_paths.h) point at what they name: a
// wrong define there would make every test that reads a source file or starts the binary fail far
// from the cause.
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "harness/testing/test_paths.h"

namespace {

bool is_file(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

TEST(TestPaths, EachPathIsWhatItNames) {
  const std::string src = tc::test_paths::source_dir(), bin = tc::test_paths::binary_dir();
  ASSERT_FALSE(src.empty());
  ASSERT_FALSE(bin.empty());
  EXPECT_TRUE(is_file(src + "/CMakeLists.txt")) << src;
  EXPECT_TRUE(is_file(src + "/harness/testing/test_paths.h")) << src;
  EXPECT_TRUE(is_file(bin + "/CMakeCache.txt")) << bin;
  EXPECT_NE(std::string(tc::test_paths::torchconform_binary()).find(bin), std::string::npos)
      << "the binary under test is the build tree's: " << tc::test_paths::torchconform_binary();
  EXPECT_FALSE(std::string(tc::test_paths::test_python()).empty());
  EXPECT_FALSE(std::string(tc::test_paths::ddp_trainer()).empty());
}

}  // namespace
