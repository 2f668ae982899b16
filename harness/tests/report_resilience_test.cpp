// Resilience of the report readers: torchconform reads reports that may be corrupt or hostile.
//
// - Corruption corpus: 1,000 truncations and 1,000 single-bit flips of a real report, at positions
//   drawn from a seeded RNG in named regions of the file. Every attempt runs in a forked child (so
//   a crash is counted, not fatal) and must be rejected with a message naming the file, leave the
//   files already written as they were, and never load other content.
// - A document nested far deeper than any report: rejected by the depth limit.
// - The report fuzzer's committed regressions, replayed through its body.
// The checkpoint side, and writes that cannot complete, are in
// reference/tests/checkpoint_resilience_test.cpp; the helpers both use in resilience_support.h.
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "harness/contract/scratch.h"
#include "harness/fuzz/report_fuzz_body.h"
#include "harness/gbench_json.h"
#include "harness/report_json.h"
#include "harness/tests/resilience_support.h"
#include "harness/util/posix_fs.h"
#include "suites/support/tensor_compare.h"

namespace tc {
namespace {

using namespace resilience;
using posix_fs::read_bytes;
using posix_fs::write_bytes;

// Regions of a report file: its start, the "sha256" line, the rest of the body, its last 64 bytes.
std::vector<Region> report_regions(const std::string& file) {
  const size_t key = file.find("\"sha256\"");
  if (key == std::string::npos || file.size() < 256) throw std::runtime_error("report without sha256");
  const size_t line_begin = file.rfind('\n', key) + 1;
  const size_t line_end = file.find('\n', key) + 1;
  return {{"start", 0, 64},
          {"sha256 line", line_begin, line_end},
          {"body", 64, file.size() - 64},
          {"last 64 bytes", file.size() - 64, file.size()}};
}

// --- reports --------------------------------------------------------------------------------------

TEST(CorruptionCorpus, EveryCorruptReportIsRejectedAndNothingWrittenIsLost) {
  Scratch dir;
  const std::string good_path = dir.file("good.json");
  // A real report: a quick run of a check on the reference and the variant it catches.
  const ChildResult made = in_child([&] {
    std::string err;
    const int rc = cli({"torchconform", "run", "--in-process", "--check", "shapes", "--recipe", "reference,view_flatten",
                        "--quick", "--json", good_path, "--html", ""}, &err);
    return (rc == 0 ? "R" : "X") + err;
  });
  ASSERT_FALSE(made.crashed) << made.how;
  ASSERT_EQ(made.verdict, 'R') << made.message;
  const std::string good = read_bytes(good_path);
  const nlohmann::json original = report_to_json(read_report_file(good_path));
  ASSERT_EQ(original["cells"].size(), 2u);

  // Files already written that a failed command must leave alone.
  const std::string prev_html = dir.file("previous.html");
  const std::string prev_compare = dir.file("previous-compare.html");
  write_bytes(prev_html, "<p>the previous report page</p>\n");
  write_bytes(prev_compare, "<p>the previous comparison page</p>\n");

  const std::vector<Region> regions = report_regions(good);
  const std::string bad = dir.file("bad.json");
  const std::vector<Corruption> plan = plan_corruptions(regions, kCorruptions, 20261130);
  // Many attempts in one child: it goes on only after one that changed nothing (R, S).
  const std::vector<ChildResult> results = in_children(plan.size(), [&](size_t i) -> std::string {
    const std::string bytes = apply(good, plan[i]);
    write_bytes(bad, bytes);
    std::string msg;
    int loaded = 0;
    nlohmann::json got;
    try {
      got = report_to_json(read_report_file(bad));  // what `report` and `bench --json` read
      ++loaded;
    } catch (const ReportFormatError& e) {
      msg = e.what();
    }
    try {
      Report again = read_comparable_file(bad);  // what `compare` and `trend` read
      ++loaded;
      if (got.is_null()) got = report_to_json(again);
    } catch (const ReportFormatError& e) {
      if (msg.empty()) msg = e.what();
    }
    if (loaded == 2) return got == original ? "Sloaded the content written" : "Dloaded other content";
    if (loaded == 1) return "Dthe two readers disagree: " + msg;
    // The commands that read it: exit 2, and nothing they could have written is touched.
    const int rc_report = cli({"torchconform", "report", bad, "--html", prev_html});
    const int rc_bench = cli({"torchconform", "bench", "--json", bad, "--benchmark_filter=^none$"});
    const int rc_compare = cli({"torchconform", "compare", bad, good_path, "--html", prev_compare});
    const int rc_trend = cli({"torchconform", "trend", good_path, bad, "--html", prev_compare});
    if (rc_report != 2 || rc_bench != 2 || rc_compare != 2 || rc_trend != 2) {
      return "Texit codes report " + std::to_string(rc_report) + ", bench " + std::to_string(rc_bench) +
             ", compare " + std::to_string(rc_compare) + ", trend " + std::to_string(rc_trend) + ": " + msg;
    }
    if (read_bytes(bad) != bytes || read_bytes(good_path) != good ||
        read_bytes(prev_html) != "<p>the previous report page</p>\n" ||
        read_bytes(prev_compare) != "<p>the previous comparison page</p>\n") {
      return "Ta file already written changed: " + msg;
    }
    if (msg.find(bad) == std::string::npos) return "M" + msg;
    return "R" + msg;
  }, "RS");
  Tally tally;
  for (size_t i = 0; i < plan.size(); ++i) tally.add(plan[i], results[i]);
  std::cout << "[corpus] report: " << good.size() << " bytes; regions:";
  for (const Region& r : regions) std::cout << " " << r.name << " [" << r.begin << ", " << r.end << ")";
  std::cout << "\n";
  tally.print("report");
  EXPECT_EQ(tally.crashed, 0);
  EXPECT_EQ(tally.count('D'), 0);
  EXPECT_EQ(tally.count('T'), 0);
  EXPECT_EQ(tally.count('M'), 0);
  EXPECT_EQ(tally.count('X'), 0);
  EXPECT_EQ(tally.count('R') + tally.count('S'), 2 * kCorruptions);
  EXPECT_EQ(list_dir(dir.file("")), (std::vector<std::string>{"bad.json", "good.json", "previous-compare.html",
                                                                "previous.html"}))
      << "a temporary file was left behind";
}

// in_children (harness/tests/resilience_support.h), which both corpora use: a crash is counted
// against the attempt it happened in, a child goes on only after a verdict in `go_on`, and every
// attempt after a crash still runs, in a fresh child.
TEST(InChildren, ACrashIsCountedAgainstItsAttemptAndEveryOtherAttemptRuns) {
  const pid_t parent = getpid();
  const std::vector<ChildResult> r = in_children(10, [&](size_t i) -> std::string {
    if (getpid() == parent) return "Xran in the parent";
    if (i == 3) std::abort();
    if (i == 6) return "Tchanged something";
    return "R" + std::to_string(getppid() == parent ? i : 1000);
  }, "R", 4);
  ASSERT_EQ(r.size(), 10u);
  for (size_t i = 0; i < r.size(); ++i) {
    if (i == 3) {
      EXPECT_TRUE(r[i].crashed);
      EXPECT_NE(r[i].how.find("signal 6"), std::string::npos) << r[i].how;
      EXPECT_NE(r[i].how.find("the child's attempt 4"), std::string::npos) << r[i].how;
    } else {
      EXPECT_FALSE(r[i].crashed) << i << ": " << r[i].how;
      EXPECT_EQ(r[i].verdict, i == 6 ? 'T' : 'R') << i;
      if (i != 6) {
        EXPECT_EQ(r[i].message, std::to_string(i));
      }
    }
  }
}

// A document nested far deeper than any report: rejected by the depth limit, not a stack overflow
// in the recursive copy, dump or destruction of the parsed value.
TEST(CorruptionCorpus, DeeplyNestedReportIsRejected) {
  Scratch dir;
  const std::string path = dir.file("deep.json");
  const int depth = 1000000;
  write_bytes(path, "{\"schema\":\"torchconform.report/1\",\"sha256\":\"0\",\"run\":" + std::string(depth, '[') +
                        std::string(depth, ']') + "}");
  const ChildResult r = in_child([&]() -> std::string {
    try {
      read_report_file(path);
    } catch (const ReportFormatError& e) {
      return std::string("R") + e.what();
    }
    return "Dloaded";
  });
  ASSERT_FALSE(r.crashed) << r.how;
  EXPECT_EQ(r.verdict, 'R') << r.message;
  EXPECT_NE(r.message.find("nested deeper than"), std::string::npos) << r.message;
}

// --- fuzzing: the crashers the report fuzzer found, replayed --------------------------------------

TEST(Fuzz, ReportRegressionsReplay) { replay("harness/fuzz/regressions/report", &fuzz::report_one); }

}  // namespace
}  // namespace tc
