#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "harness/util/atomic_file.h"
#include "harness/html_writer.h"
#include "harness/util/posix_fs.h"
#include "harness/report_json.h"

namespace tc {
namespace {

Report sample_report() {
  Report r;
  r.tool = {{"name", "torchconform"}, {"version", "0.1.0"}, {"git_commit", nullptr}};
  r.run = {{"started_at", "2026-01-01T00:00:00Z"}, {"ended_at", "2026-01-01T00:00:01Z"},
           {"argv", {"torchconform", "run"}}, {"seed", 1}, {"devices", {"cpu"}}};
  r.environment = {{"libtorch", {{"version", "2.15.0"}}}};
  Cell c;
  c.check = "reproducibility";
  c.recipe = "no_seed";
  c.device = "cpu";
  c.role = Role::kVariant;
  c.expected = Expected::kFail;
  c.outcome = Outcome::kFail;
  c.verdict = Verdict::kOk;
  c.evidence = "loss curves diverge at step 0 <b>&</b>";
  c.metrics = {{"first_divergence_step", 0}, {"loss_curve_a", {1.5, 1.25}}};
  c.duration_s = 0.25;
  r.cells.push_back(c);
  Cell s = c;
  s.device = "cuda";
  s.verdict = Verdict::kSkipped;
  s.outcome = Outcome::kNone;
  s.evidence = "no CUDA device";
  r.cells.push_back(s);
  r.benchmarks.push_back({"train_step", "cpu", "s", {0.1, 0.2, 0.3}, 0.2, 0.5});
  return r;
}

TEST(ReportJson, RoundTripKeepsEveryField) {
  Report r = sample_report();
  nlohmann::json j = report_to_json(r);
  EXPECT_EQ(j["schema"], kReportSchema);
  EXPECT_EQ(j["summary"]["ok"], 1);
  EXPECT_EQ(j["summary"]["skipped"], 1);
  EXPECT_EQ(j["summary"]["total"], 2);
  Report back = report_from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(report_to_json(back), j);
  ASSERT_EQ(back.cells.size(), 2u);
  EXPECT_EQ(back.cells[0].expected, Expected::kFail);
  EXPECT_EQ(back.cells[0].metrics["loss_curve_a"][1], 1.25);
  EXPECT_EQ(back.benchmarks[0].samples.size(), 3u);
}

TEST(ReportJson, BenchmarkCountersRoundTripAndAReportWithoutThemStillReads) {
  Report r = sample_report();
  r.benchmarks.push_back({"amp/train_step", "cpu", "ms", {50, 52, 51}, 51, 0.02});
  r.benchmarks.back().counters["MFU"] = {{0.25, 0.24, 0.26}, 0.25};
  r.benchmarks.back().counters["TFLOP/s"] = {{0.0235, 0.0226, 0.0244}, 0.0235};
  const nlohmann::json j = report_to_json(r);
  EXPECT_FALSE(j["benchmarks"][0].contains("counters"));  // none: the entry is written as before
  EXPECT_EQ(j["benchmarks"][1]["counters"]["MFU"]["samples"][2], 0.26);
  EXPECT_EQ(j["benchmarks"][1]["counters"]["MFU"]["median"], 0.25);
  const Report back = report_from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(report_to_json(back), j);
  EXPECT_TRUE(back.benchmarks[0].counters.empty());
  ASSERT_EQ(back.benchmarks[1].counters.size(), 2u);
  EXPECT_EQ(back.benchmarks[1].counters.at("TFLOP/s").samples, (std::vector<double>{0.0235, 0.0226, 0.0244}));
  EXPECT_DOUBLE_EQ(back.benchmarks[1].counters.at("MFU").median, 0.25);
  // A report written before counters were kept: its benchmarks have no "counters" field.
  nlohmann::json old = report_to_json(sample_report());
  old["benchmarks"][0].erase("counters");
  old.erase("sha256");
  EXPECT_TRUE(report_from_json(old).benchmarks[0].counters.empty());
  // Counters that are not an object of {samples, median}: a format error, not a crash.
  nlohmann::json bad = j;
  bad.erase("sha256");
  bad["benchmarks"][1]["counters"] = {1, 2};
  EXPECT_THROW(report_from_json(bad), ReportFormatError);
  bad["benchmarks"][1]["counters"] = {{"MFU", {{"median", 0.25}}}};
  EXPECT_THROW(report_from_json(bad), ReportFormatError);
}

TEST(ReportJson, CpuSamplesRoundTripAreOptionalAndMustMatchTheSamples) {
  Report r = sample_report();
  r.benchmarks.push_back({"reference/train_step", "cpu", "ms", {5.0, 6.0, 5.5}, 5.5, 0.07});
  r.benchmarks.back().cpu_samples = {2.5, 2.4, 2.6};
  const nlohmann::json j = report_to_json(r);
  EXPECT_FALSE(j["benchmarks"][0].contains("cpu_samples"));  // none kept: written as before
  EXPECT_EQ(j["benchmarks"][1]["cpu_samples"][1], 2.4);
  const Report back = report_from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(report_to_json(back), j);
  EXPECT_TRUE(back.benchmarks[0].cpu_samples.empty());
  EXPECT_EQ(back.benchmarks[1].cpu_samples, (std::vector<double>{2.5, 2.4, 2.6}));
  nlohmann::json bad = j;
  bad.erase("sha256");
  bad["benchmarks"][1]["cpu_samples"] = {2.5, 2.4};  // one repetition short
  EXPECT_THROW(report_from_json(bad), ReportFormatError);
  bad["benchmarks"][1]["cpu_samples"] = "2.5";
  EXPECT_THROW(report_from_json(bad), ReportFormatError);
}

TEST(ReportJson, ASubjectsCellKeepsItsRoleAndTheSummaryCountsRolesApart) {
  Report r = sample_report();
  Cell mine = r.cells[0];
  mine.recipe = "team_mlp";
  mine.role = Role::kSubject;
  mine.expected = Expected::kPass;
  mine.verdict = Verdict::kFail;
  r.cells.push_back(mine);
  nlohmann::json j = report_to_json(r);
  EXPECT_EQ(j["cells"][2]["role"], "subject");
  EXPECT_EQ(j["cells"][2]["verdict"], "fail");
  EXPECT_EQ(j["summary"]["fail"], 1);
  EXPECT_EQ(j["summary"]["by_role"]["subject"]["fail"], 1);
  EXPECT_EQ(j["summary"]["by_role"]["subject"]["total"], 1);
  EXPECT_EQ(j["summary"]["by_role"]["variant"]["total"], 2);
  EXPECT_FALSE(j["summary"]["by_role"].contains("reference"));
  Report back = report_from_json(j);
  EXPECT_EQ(back.cells[2].role, Role::kSubject);
  EXPECT_EQ(back.cells[2].verdict, Verdict::kFail);
  j.erase("sha256");
  j["cells"][2]["role"] = "user";
  EXPECT_THROW(report_from_json(j), ReportFormatError);
}

// What ended without a verdict is counted per check: the cells with a promise recorded, and per
// promise the cells (a promise recorded twice in one cell, per dtype, counts once); a skipped cell
// is not counted.
TEST(ReportJson, TheSummaryCountsTheCellsThatEndedAPromiseNotJudged) {
  Report r = sample_report();
  Cell c = r.cells[0];
  c.check = "amp";
  c.verdict = Verdict::kOk;
  c.metrics["promises"] = {{{"id", "parity"}, {"status", "recorded"}, {"evidence", "bf16 parity not judged"}},
                           {{"id", "parity"}, {"status", "recorded"}, {"evidence", "fp16 parity not judged"}},
                           {{"id", "engagement"}, {"status", "held"}, {"evidence", "ok"}}};
  r.cells.push_back(c);
  c.recipe = "other";
  c.metrics["promises"] = {{{"id", "engagement"}, {"status", "recorded"}, {"evidence", "no gain"}}};
  r.cells.push_back(c);
  c.recipe = "skipped_one";
  c.verdict = Verdict::kSkipped;
  r.cells.push_back(c);
  const nlohmann::json j = report_to_json(r);
  const nlohmann::json expected = {{"amp", {{"cells", 2}, {"promises", {{"parity", 1}, {"engagement", 1}}}}}};
  EXPECT_EQ(j["summary"]["not_judged"], expected) << j["summary"].dump();
  EXPECT_EQ(report_to_json(report_from_json(j))["summary"]["not_judged"], expected);
}

// A report written before roles has none: its correct recipes were the suite's controls.
TEST(ReportJson, AReportWithoutRolesIsReadWithTheRolesItWasJudgedBy) {
  Report r = sample_report();
  r.cells[1].recipe = "reference";
  r.cells[1].expected = Expected::kPass;
  nlohmann::json j = report_to_json(r);
  j.erase("sha256");
  for (auto& c : j["cells"]) c.erase("role");
  j["summary"].erase("by_role");
  j["summary"].erase("fail");
  Report back = report_from_json(j);
  EXPECT_EQ(back.cells[0].role, Role::kVariant);
  EXPECT_EQ(back.cells[1].role, Role::kReference);
}

TEST(ReportJson, Sha256FieldCatchesAnEditAndAnUnknownFieldIsRefused) {
  const nlohmann::json j = report_to_json(sample_report());
  ASSERT_TRUE(j.contains("sha256"));
  EXPECT_EQ(j["sha256"], report_content_sha256(j));
  EXPECT_NO_THROW(report_from_json(j));
  nlohmann::json edited = j;
  edited["cells"][0]["verdict"] = "missed";
  try {
    report_from_json(edited);
    FAIL() << "an edited report was read";
  } catch (const ReportFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("does not match its \"sha256\""), std::string::npos) << e.what();
  }
  nlohmann::json without = edited;  // a report written by hand or by an older build: no check
  without.erase("sha256");
  EXPECT_EQ(report_from_json(without).cells[0].verdict, Verdict::kMissed);
  nlohmann::json renamed = j;  // a flipped bit in the field's name
  renamed["sha2v6"] = renamed["sha256"];
  renamed.erase("sha256");
  EXPECT_THROW(report_from_json(renamed), ReportFormatError);
}

TEST(ReportJson, RejectsOtherSchemaWithPlainMessage) {
  nlohmann::json j = report_to_json(sample_report());
  j["schema"] = "torchconform.report/2";
  try {
    report_from_json(j);
    FAIL();
  } catch (const ReportFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("torchconform.report/2"), std::string::npos);
  }
  EXPECT_THROW(report_from_json(nlohmann::json::array()), ReportFormatError);
  j = report_to_json(sample_report());
  j["cells"][0]["verdict"] = "great";
  EXPECT_THROW(report_from_json(j), ReportFormatError);
  j = report_to_json(sample_report());
  j["cells"][0].erase("device");
  EXPECT_THROW(report_from_json(j), ReportFormatError);
}

TEST(ReportJson, ReadingCorruptFilesNamesThePath) {
  const std::string dir = posix_fs::make_temp_dir("tc-report-test-");
  const std::string path = dir + "/bad.json";
  std::ofstream(path) << "{\"schema\": \"torchconform.report/1\", \"cells\": [";  // truncated
  try {
    read_report_file(path);
    FAIL();
  } catch (const ReportFormatError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_report_file(dir + "/missing.json"), ReportFormatError);
  posix_fs::remove_tree(dir);
}

TEST(AtomicFile, FailedWriteLeavesThePreviousFileIntact) {
  const std::string dir = posix_fs::make_temp_dir("tc-atomic-test-");
  const std::string path = dir + "/latest.json";
  write_file_atomically(path, "first");
  write_file_atomically(path, "second");
  std::ifstream in(path);
  std::string content((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(content, "second");
  // A path whose directory is a file cannot be written: clear error, nothing else touched. (A
  // read-only directory, which root ignores, is FailedWrites.* in tc_checkpoint_resilience_tests: a
  // child that drops to an unprivileged user writes the report there.)
  EXPECT_THROW(write_file_atomically(path + "/inside", "x"), std::runtime_error);
  // A name that is a directory: the rename over it fails, the directory is left as it was.
  const std::string taken = dir + "/taken";
  ASSERT_EQ(mkdir(taken.c_str(), 0755), 0);
  write_file_atomically(taken + "/kept.json", "kept");
  EXPECT_THROW(write_file_atomically(taken, "over a directory"), std::runtime_error);
  std::ifstream again(taken + "/kept.json");
  std::string kept((std::istreambuf_iterator<char>(again)), {});
  EXPECT_EQ(kept, "kept");
  std::ifstream first(path);
  std::string still((std::istreambuf_iterator<char>(first)), {});
  EXPECT_EQ(still, "second");
  posix_fs::remove_tree(dir);
}

TEST(Html, ListsEveryCellEscaped) {
  std::string html = render_html(sample_report());
  EXPECT_NE(html.find("data-check=\"reproducibility\" data-recipe=\"no_seed\" data-device=\"cpu\""),
            std::string::npos);
  EXPECT_NE(html.find("data-device=\"cuda\""), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;&amp;&lt;/b&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<b>&</b>"), std::string::npos);
}

}  // namespace
}  // namespace tc
