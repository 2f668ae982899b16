// checkpoint_safety's corrupt_files_rejected, which no variant breaks: a recipe that writes the
// reference's checkpoint (hash and size on its first line) but loads it without checking them,
// straight into LibTorch's reader part by part (as `torch.load` does), loads bit-flipped tensor
// data silently as other state. The reference's loader rejects every such file. That is recorded
// in the evidence, not judged: torch.save's files are the same, and the seeds' checkpoint practice
// (whole state, weights_only=True) asks for no checksum; truncations are still rejected.
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "reference/reference_run.h"
#include "suites/tests/test_recipes.h"

namespace tc {
namespace {

class UncheckedLoad : public ref::ReferenceRun {
 public:
  void load_checkpoint(const std::string& path) override {
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t line_end = bytes.find('\n');
    std::istringstream archive(bytes.substr(line_end == std::string::npos ? 0 : line_end + 1));
    torch::serialize::InputArchive root;
    root.load_from(archive, options_.device);
    for (const ref::CheckpointPart& part : checkpoint_parts()) {
      torch::serialize::InputArchive sub;
      if (!root.try_read(part.name, sub)) throw std::runtime_error("no '" + part.name + "' state");
      part.load(sub);
    }
  }
};

TEST(CheckpointSafetyCorruption, ALoaderThatSkipsTheHashLoadsFlippedBitsAsOtherStateRecordedNotJudged) {
  const Cell c = testing_recipes::run_one("checkpoint_safety", "unchecked_load",
                                          [] { return std::unique_ptr<tc::Run>(new UncheckedLoad()); });
  EXPECT_EQ(testing_recipes::promise_status(c, "corrupt_files_rejected"), "held") << c.evidence;
  EXPECT_GT(c.metrics.value("bit_flips_loaded_other_state", 0), 0) << c.metrics.dump().substr(0, 800);
  EXPECT_EQ(c.metrics.value("truncations_loaded", -1), 0) << c.metrics.dump().substr(0, 800);
  EXPECT_NE(c.evidence.find("single-bit flips loaded as other values"), std::string::npos) << c.evidence;
  std::cout << c.evidence << "\n";
}

// A save slower in the saving child than in the judging process, as a Python child's first saves are
// or a disk other processes keep busy: here 100 ms longer in any process but the one that built the
// run (the kill trials' children are forks of it). The kill window starts from the judging process's
// save (a few ms: 4x that + 1 ms is well under 100 ms). Counting finished saves alone, the window
// never grew, every trial killed the child inside its first save, and the cell erred ("completed 0
// saves": python.written_apart's checkpoint_safety cell under ci/test-under-load 2 did). A save cut by
// the kill counts for how long it had lasted, so the window grows until saves finish inside it.
class SlowerSaveInTheChild : public ref::ReferenceRun {
 public:
  void save_checkpoint(const std::string& path) override {
    if (getpid() != built_in_) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ReferenceRun::save_checkpoint(path);
  }

 private:
  const pid_t built_in_ = getpid();
};

// checkpoint_safety's cell on the CPU for a one-off recipe, in the quick tier's length (20 kill
// trials at most).
Cell quick_cell(const std::string& recipe, RunFactory make) {
  Registry reg;
  reg.add_check(*Registry::global().find_check("checkpoint_safety"));
  reg.add_recipe({recipe, "test-only recipe", {}, std::move(make), __FILE__, __LINE__});
  RunPlan plan;
  plan.devices = {{"cpu", true, ""}};
  plan.checks = {"checkpoint_safety"};
  plan.quick = true;
  return run_cells(reg, plan).at(0);
}

TEST(CheckpointSafetyKillTrials, ASaveSlowerInTheSavingChildGrowsTheWindowUntilSavesFinish) {
  const Cell c = quick_cell("slower_save_in_the_child", testing_recipes::make<SlowerSaveInTheChild>());
  std::cout << c.evidence << "\n";
  EXPECT_EQ(testing_recipes::promise_status(c, "atomic_save"), "held") << c.evidence;
  EXPECT_GT(c.metrics.value("kill_trials_completed_saves", 0), 0) << c.metrics.dump().substr(0, 800);
  EXPECT_GE(c.metrics.value("longest_save_us", 0), 100000) << c.metrics.dump().substr(0, 800);
  EXPECT_EQ(c.metrics.value("kill_trials", 0), 20) << c.metrics.dump().substr(0, 800);
}

// A save that never ends in the saving child (as one waiting on a lock that a thread of the judging
// process held at the fork, which no thread of the child will ever release), while it ends in the
// process that built the run. No kill trial can see a save finish: the trials stop after
// kTrialsWithoutAFinishedSave (10) of the quick tier's 20, and the cell errs saying the trials prove
// nothing, rather than holding or breaking atomic_save on saves that never ran. Each trial's window
// grows from the save cut by the kill, up to its cap (2 s), and the trials wait it out: about 20 s,
// mostly asleep, hence the slow tier (a suite named *Slow: cmake/gtest_suites_discover.cmake).
class SaveNeverEndsInTheChild : public ref::ReferenceRun {
 public:
  void save_checkpoint(const std::string& path) override {
    if (getpid() != built_in_) {
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));  // until the trial's SIGKILL
    }
    ReferenceRun::save_checkpoint(path);
  }

 private:
  const pid_t built_in_ = getpid();
};

TEST(CheckpointSafetyKillTrialsSlow, ASaveThatNeverEndsInTheSavingChildStopsTheTrialsAfterTenAndErrs) {
  const Cell c = quick_cell("save_never_ends_in_the_child", testing_recipes::make<SaveNeverEndsInTheChild>());
  std::cout << c.evidence << "\n";
  // An error's cell keeps its evidence, not its metrics: the counts are read there.
  EXPECT_EQ(c.verdict, Verdict::kError) << c.evidence;
  EXPECT_NE(c.evidence.find("of 10 kill trials completed 0 saves"), std::string::npos) << c.evidence;
  EXPECT_NE(c.evidence.find("and 0 stopped on their own: the kill trials prove nothing"), std::string::npos) << c.evidence;
  EXPECT_NE(c.evidence.find("(the longest seen, or cut by a kill, 2 s)"), std::string::npos)
      << "the unfinished save counted up to its 2 s cap: " << c.evidence;
  EXPECT_EQ(c.evidence.find("atomic_save"), std::string::npos) << "no verdict on atomic_save: " << c.evidence;
}

}  // namespace
}  // namespace tc
