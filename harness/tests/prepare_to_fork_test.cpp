// forking::prepare_to_fork (harness/util/forking.h): which regions it maps with 2 MiB pages, that it
// adds nothing to a sparse region's memory, that a fork after it sees the same bytes (and the
// parent keeps its own when the child writes), and that a second call with nothing grown is free.
// What it saves is measured by tc_fork_bench (harness/fork_bench.cpp), not here.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "harness/util/forking.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

namespace tc {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kPage = 4096;

// Rss and AnonHugePages (KiB) of the mapping of /proc/self/smaps that holds `p`.
struct Smaps {
  long rss_kib = -1, anon_huge_kib = -1;
};
Smaps smaps_of(const void* p) {
  std::ifstream f("/proc/self/smaps");
  std::string line;
  bool in = false;
  Smaps s;
  const auto at = reinterpret_cast<uintptr_t>(p);
  while (std::getline(f, line)) {
    uintptr_t b = 0, e = 0;
    char dash = 0;
    std::istringstream head(line);
    if ((head >> std::hex >> b >> dash >> e) && dash == '-' && line.find(':') > line.find(' ')) {
      in = b <= at && at < e;
      continue;
    }
    if (!in) continue;
    if (line.rfind("Rss:", 0) == 0) s.rss_kib = std::stol(line.substr(4));
    if (line.rfind("AnonHugePages:", 0) == 0) s.anon_huge_kib = std::stol(line.substr(14));
  }
  return s;
}

// An anonymous read-write region of `bytes`, a region of its own: an inaccessible page on each side
// keeps the kernel from merging it with a neighbouring anonymous mapping (as it merges two mmaps).
char* map_region(size_t bytes) {
  void* p = mmap(nullptr, bytes + 2 * kPage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  char* r = static_cast<char*>(p) + kPage;
  return mprotect(r, bytes, PROT_READ | PROT_WRITE) == 0 ? r : nullptr;
}
void unmap_region(char* r, size_t bytes) { munmap(r - kPage, bytes + 2 * kPage); }

char pattern(size_t page) { return static_cast<char>(page % 251 + 1); }

TEST(PrepareToFork, DenseRegionsOnlyAndAForkSeesTheSameBytes) {
  // Whether this kernel collapses a region at all here (Linux 6.1+, a free 2 MiB page): a probe of
  // its own, so that a kernel or a moment without huge pages skips only that assertion.
  const size_t probe_bytes = 8 * kMiB;
  char* probe = map_region(probe_bytes);
  ASSERT_NE(probe, nullptr);
  std::memset(probe, 1, probe_bytes);
  char* aligned = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(probe) + 2 * kMiB - 1) & ~(2 * kMiB - 1));
  const bool collapses = madvise(aligned, 2 * kMiB, MADV_COLLAPSE) == 0;
  const int probe_errno = errno;
  unmap_region(probe, probe_bytes);

  const size_t bytes = 96 * kMiB;
  char* dense = map_region(bytes);
  char* sparse = map_region(bytes);
  ASSERT_NE(dense, nullptr);
  ASSERT_NE(sparse, nullptr);
  for (size_t i = 0; i < bytes / kPage; ++i) std::memset(dense + i * kPage, pattern(i), kPage);
  for (size_t i = 0; i < bytes / kPage; i += 16) sparse[i * kPage] = pattern(i);  // 1 page in 16
  const Smaps sparse_before = smaps_of(sparse);

  const long mib = forking::prepare_to_fork();
  const Smaps dense_after = smaps_of(dense), sparse_after = smaps_of(sparse);
  if (sparse_before.rss_kib < static_cast<long>(bytes / 1024 / 2)) {
    EXPECT_EQ(sparse_after.rss_kib, sparse_before.rss_kib) << "a sparse region must not be filled in";
    EXPECT_EQ(sparse_after.anon_huge_kib, sparse_before.anon_huge_kib);
  } else {
    // transparent_hugepage=always gives a region 2 MiB pages at its first touch: nothing is sparse.
    std::printf("the kernel made the sparse region resident at its first touches (%ld KiB): its assertions "
                "are left out\n", sparse_before.rss_kib);
  }
  if (collapses) {
    EXPECT_GE(mib, 90) << "the dense region's 2 MiB-aligned part";
    EXPECT_GE(dense_after.anon_huge_kib, 90 * 1024) << "dense region: " << dense_after.rss_kib << " KiB resident";
  } else {
    std::printf("this kernel collapsed no probe region (errno %d, %s): the huge-page assertions are left out\n",
                probe_errno, std::strerror(probe_errno));
  }
  EXPECT_EQ(forking::prepare_to_fork(), 0) << "nothing grew since: no second pass";

  const pid_t pid = forking::fork_with_hooks();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int bad = 0;
    for (size_t i = 0; i < bytes / kPage; ++i) bad += dense[i * kPage + kPage / 2] != pattern(i);
    for (size_t i = 0; i < bytes / kPage; i += 16) bad += sparse[i * kPage] != pattern(i);
    std::memset(dense, 0x5a, bytes / 2);  // the child's writes are its own
    _exit(bad == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child saw other bytes";
  size_t changed = 0;
  for (size_t i = 0; i < bytes / kPage; ++i) changed += dense[i * kPage] != pattern(i);
  EXPECT_EQ(changed, 0u) << "the child's writes reached the parent";
  unmap_region(dense, bytes);
  unmap_region(sparse, bytes);
}

TEST(PrepareToFork, TurnedOffByTheEnvironment) {
  const size_t bytes = 64 * kMiB;
  char* dense = map_region(bytes);
  ASSERT_NE(dense, nullptr);
  std::memset(dense, 7, bytes);
  setenv("TORCHCONFORM_FORK_HUGE_PAGES", "0", 1);
  const long mib = forking::prepare_to_fork();
  const Smaps after = smaps_of(dense);
  unsetenv("TORCHCONFORM_FORK_HUGE_PAGES");
  EXPECT_EQ(mib, 0);
  EXPECT_EQ(after.anon_huge_kib, 0);
  unmap_region(dense, bytes);
}

}  // namespace
}  // namespace tc
