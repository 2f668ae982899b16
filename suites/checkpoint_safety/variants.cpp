// Broken variants the checkpoint_safety check must catch.
#include <fstream>

#include <torch/torch.h>

#include "harness/contract/registry.h"
#include "reference/reference_run.h"

namespace tc::variants {

// The saving code holds the model inside a wrapper (as DDP does) and saves the wrapper: every key
// gets a "module." prefix. It loads back through the same wrapper, so it resumes itself, but the
// file does not load into a bare model.
struct Wrapper : torch::nn::Module {
  explicit Wrapper(std::shared_ptr<torch::nn::Module> inner) { register_module("module", std::move(inner)); }
};

class WrapperPrefixedState : public ref::ReferenceRun {
 protected:
  std::vector<ref::CheckpointPart> checkpoint_parts() override {
    auto parts = ReferenceRun::checkpoint_parts();
    parts[0].save = [this](torch::serialize::OutputArchive& a) { Wrapper(model_.ptr()).save(a); };
    parts[0].load = [this](torch::serialize::InputArchive& a) { Wrapper(model_.ptr()).load(a); };
    return parts;
  }
};

// Fail: the checkpoint written straight over the previous one: the file is truncated when opened
// and filled while the state serialises, so a crash in between leaves a torn file and no previous
// checkpoint.
class NonAtomicSave : public ref::ReferenceRun {
 public:
  void save_checkpoint(const std::string& path) override {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    const std::string bytes = ref::checkpoint_bytes(checkpoint_parts());
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
};

}  // namespace tc::variants

TC_RECIPE(tc::variants::WrapperPrefixedState, "wrapper_prefixed_state",
          "saves the wrapper: model keys prefixed with 'module.'")
    ->MustBeCaughtBy({"checkpoint_safety"})
    ->Breaks("checkpoint_safety", {"strict_bare_load"});
TC_RECIPE(tc::variants::NonAtomicSave, "non_atomic_save",
          "writes the checkpoint in place, not via a temporary file and rename")
    ->MustBeCaughtBy({"checkpoint_safety"})
    ->Breaks("checkpoint_safety", {"atomic_save"});
