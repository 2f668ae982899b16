// checkpoint_safety's corrupt_files_rejected, which no variant breaks: a recipe that writes the
// reference's checkpoint (hash and size on its first line) but loads it without checking them,
// straight into LibTorch's reader part by part (as `torch.load` does), loads bit-flipped tensor
// data silently as other state. The reference's loader rejects every such file. That is recorded
// in the evidence, not judged: torch.save's files are the same, and the seeds' checkpoint practice
// (whole state, weights_only=True) asks for no checksum; truncations are still rejected.
#include <fstream>
#include <iterator>
#include <sstream>

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

}  // namespace
}  // namespace tc
