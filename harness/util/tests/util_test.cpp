// The utilities (harness/util, no LibTorch): sha256, atomic writes, POSIX file helpers.
#include <unistd.h>

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "harness/util/atomic_file.h"
#include "harness/util/posix_fs.h"
#include "harness/util/sha256.h"

namespace tc {
namespace {

TEST(Sha256, KnownVectors) {  // FIPS 180-2 examples
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex(std::string("a\0b", 3)).size(), 64u);  // any bytes, NUL included
  EXPECT_NE(sha256_hex(std::string("a\0b", 3)), sha256_hex("a"));
}

TEST(Sha256, FedInPiecesEqualsOneShot) {
  Sha256 h;
  h.update("a", 1);
  h.update(std::string("bc"));
  h.update(nullptr, 0);  // an empty piece changes nothing
  EXPECT_EQ(h.hex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Sha256 empty;
  EXPECT_EQ(empty.hex(), sha256_hex(""));
  EXPECT_THROW(empty.update("x"), std::logic_error);  // spent after hex()
}

class Scratch : public ::testing::Test {
 protected:
  void SetUp() override { dir = posix_fs::make_temp_dir("tc-util-test-"); }
  void TearDown() override { posix_fs::remove_tree(dir); }
  std::string dir;
};

TEST_F(Scratch, AtomicWriteReplacesWholeAndLeavesNoTemporary) {
  const std::string f = dir + "/a.json";
  write_file_atomically(f, "first");
  write_file_atomically(f, std::string("second\0bytes", 12));
  EXPECT_EQ(posix_fs::read_bytes(f), std::string("second\0bytes", 12));
  posix_fs::remove_tree(f);
  EXPECT_FALSE(posix_fs::exists(f));
  EXPECT_EQ(rmdir(dir.c_str()), 0) << "a temporary file was left in " << dir;  // empty again
  posix_fs::make_dirs(dir);
}

// (A write that fails midway keeping the previous file: the resilience tests, under a file-size
// limit and in a read-only directory with privileges dropped.)
TEST_F(Scratch, AtomicWriteMakesMissingDirectories) {
  const std::string f = dir + "/no/such/dir/x.json";
  write_file_atomically(f, "x");
  EXPECT_EQ(posix_fs::read_bytes(f), "x");
}

TEST_F(Scratch, WriteUnderAFileIsAnErrorNamingThePath) {
  posix_fs::write_bytes(dir + "/plain", "a file, not a directory");
  const std::string f = dir + "/plain/x.json";
  try {
    write_file_atomically(f, "x");
    FAIL() << "wrote under a regular file";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("plain"), std::string::npos) << e.what();
  }
  EXPECT_THROW(posix_fs::write_bytes(f, "x"), std::runtime_error);
  EXPECT_EQ(posix_fs::read_bytes(dir + "/plain"), "a file, not a directory");
}

TEST_F(Scratch, MakeDirsRemoveTreeAndNames) {
  posix_fs::make_dirs(dir + "/a/b/c");
  posix_fs::write_bytes(dir + "/a/b/c/f", "bytes");
  EXPECT_TRUE(posix_fs::exists(dir + "/a/b/c/f"));
  posix_fs::remove_tree(dir + "/a");
  EXPECT_FALSE(posix_fs::exists(dir + "/a"));
  EXPECT_EQ(posix_fs::read_bytes(dir + "/gone"), "");
  EXPECT_EQ(posix_fs::dir_name("a/b/c.json"), "a/b");
  EXPECT_EQ(posix_fs::dir_name("c.json"), ".");
  EXPECT_EQ(posix_fs::base_name("a/b/c.json"), "c.json");
}

// The /proc reader forking::prepare_to_fork and the fork benchmark share: a field by its whole name.
TEST_F(Scratch, ProcKibReadsAFieldByItsWholeName) {
  const std::string f = dir + "/status";
  posix_fs::write_bytes(f, "RssAnonX:\t  7 kB\nRssAnon:\t   1234 kB\nRssFile: 99 kB\nOdd: kB\n");
  EXPECT_EQ(posix_fs::proc_kib(f, "RssAnon"), 1234);
  EXPECT_EQ(posix_fs::proc_kib(f, "RssFile"), 99);
  EXPECT_EQ(posix_fs::proc_kib(f, "Rss"), -1);        // a prefix of a name is not the name
  EXPECT_EQ(posix_fs::proc_kib(f, "Odd"), -1);        // no number
  EXPECT_EQ(posix_fs::proc_kib(f, "Missing"), -1);
  EXPECT_EQ(posix_fs::proc_kib(dir + "/gone", "RssAnon"), -1);
  EXPECT_GT(posix_fs::proc_kib("/proc/self/status", "VmRSS"), 0);  // this process's own
}

}  // namespace
}  // namespace tc
