// Approval testing: a reporter's output for fixed records, diffed against the file checked in
// under harness/tests/approved/. The records carry no volatile field (dates, hosts and paths are
// fixed strings), so any difference is a change of the output format.
//
// On a mismatch the test writes <build>/test-output/approved/<name> (the received output) and
// names a diff command. To approve a deliberate change, re-run with TC_APPROVE=1, which writes
// the received output over the approved file, then review and commit it:
//     TC_APPROVE=1 ctest --test-dir build -R Approval
//     git diff harness/tests/approved/
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "harness/util/posix_fs.h"
#include "harness/testing/test_paths.h"

namespace tc {

inline void expect_approved(const std::string& name, const std::string& received) {
  namespace fs = std::filesystem;
  const fs::path approved = fs::path(tc::test_paths::source_dir()) / "harness/tests/approved" / name;
  const char* approve = std::getenv("TC_APPROVE");
  if (approve && std::string(approve) == "1") {
    std::ofstream(approved, std::ios::binary) << received;
    std::printf("approved %s\n", approved.c_str());
    return;
  }
  std::ifstream in(approved, std::ios::binary);
  ASSERT_TRUE(in.good()) << approved << " is missing; create it with TC_APPROVE=1";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string expected = ss.str();
  if (expected == received) return;
  const fs::path out = fs::path(tc::test_paths::binary_dir()) / "test-output/approved" / name;
  posix_fs::make_dirs(out.parent_path().string());
  std::ofstream(out, std::ios::binary) << received;
  std::istringstream a(expected), b(received);
  std::string la, lb;
  int line = 1;
  while (std::getline(a, la) && std::getline(b, lb) && la == lb) ++line;
  ADD_FAILURE() << name << " differs from the approved output at line " << line << ":\n  approved: " << la
                << "\n  received: " << lb << "\n  diff -u " << approved << ' ' << out
                << "\n  to approve a deliberate change: TC_APPROVE=1 ctest -R Approval";
}

}  // namespace tc
