// Checkpoints: the full training state as named parts, written atomically, with a content hash.
//
// File format (torchconform.checkpoint/1): a LibTorch archive holding "format", "sha256" (hex of
// the payload) and "payload" (uint8: the bytes of an inner LibTorch archive with one
// sub-archive per part). Loading checks the format and the hash before any state is touched, finds
// every part before loading any, and loads the model strictly (same keys, same shapes).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <torch/nn/module.h>
#include <torch/serialize/archive.h>

namespace tc::ref {

inline constexpr const char* kCheckpointFormat = "torchconform.checkpoint/1";

// One named part of the full training state; the checkpoint is the list of parts.
struct CheckpointPart {
  std::string name;
  std::function<void(torch::serialize::OutputArchive&)> save;
  std::function<void(torch::serialize::InputArchive&)> load;
};

// The checkpoint holding `parts`, as an archive, and as bytes.
torch::serialize::OutputArchive checkpoint_archive(const std::vector<CheckpointPart>& parts);
std::string checkpoint_bytes(const std::vector<CheckpointPart>& parts);

// Writes the parts to `path` atomically (temporary file, fsync, rename).
void save_parts(const std::vector<CheckpointPart>& parts, const std::string& path);

// Opens a checkpoint and verifies format and hash: the inner archive, parts by name.
// Throws std::runtime_error naming the path for an unreadable, truncated, corrupt or foreign file.
torch::serialize::InputArchive open_checkpoint(const std::string& path, c10::Device device);

// Loads every part; any missing part, or a corrupt file, throws before any part is loaded.
void load_parts(const std::vector<CheckpointPart>& parts, const std::string& path, c10::Device device);

// Loads a module's state strictly: every parameter and buffer present with its shape, no key the
// module lacks. On a mismatch throws std::runtime_error listing missing, unexpected and wrongly
// shaped keys, before anything is modified.
void load_module_strict(torch::nn::Module& module, torch::serialize::InputArchive& archive);

// SHA-256 of bytes, lower-case hex (OpenSSL).
std::string sha256_hex(const std::string& bytes);

}  // namespace tc::ref
