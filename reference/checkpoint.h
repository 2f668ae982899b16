// Checkpoints: the full training state as named parts, written atomically, with a content hash.
//
// File format (torchconform.checkpoint/2): one text line
//   torchconform.checkpoint/2 sha256=<64 hex digits> bytes=<decimal>\n
// then exactly that many bytes: a LibTorch archive with one sub-archive per part, whose SHA-256 the
// line gives. Loading reads the whole file and checks the line, the size and the hash before any
// byte reaches LibTorch's zip reader or unpickler, so a truncated or bit-flipped file is rejected
// by our code; then it checks that every tensor in the archive lies within its storage (LibTorch's
// unpickler does not: a crafted file could otherwise read out of bounds), finds every part before
// loading any, and loads the model strictly (same keys, same shapes).
// (torchconform.checkpoint/1, a LibTorch archive wrapping the hashed payload, is refused with a
// message saying so: a flipped bit in its unhashed outer zip could load the same state unnoticed.)
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <torch/nn/module.h>
#include <torch/serialize/archive.h>

#include "harness/util/sha256.h"

namespace tc::ref {

inline constexpr const char* kCheckpointFormat = "torchconform.checkpoint/2";

// One named part of the full training state; the checkpoint is the list of parts.
struct CheckpointPart {
  std::string name;
  std::function<void(torch::serialize::OutputArchive&)> save;
  std::function<void(torch::serialize::InputArchive&)> load;
};

// The LibTorch archive of `parts` (the file's body), and the whole file's bytes (line + body).
torch::serialize::OutputArchive checkpoint_archive(const std::vector<CheckpointPart>& parts);
std::string checkpoint_bytes(const std::vector<CheckpointPart>& parts);
// The file's bytes for a given body (a LibTorch archive's bytes): the line, then the body.
std::string checkpoint_file_bytes(const std::string& body);

// Writes the parts to `path` atomically (temporary file, fsync, rename).
void save_parts(const std::vector<CheckpointPart>& parts, const std::string& path);

// Opens a checkpoint and verifies format, size, hash and tensor bounds: the archive, parts by name.
// Throws std::runtime_error naming the path for an unreadable, truncated, corrupt or foreign file.
torch::serialize::InputArchive open_checkpoint(const std::string& path, c10::Device device);
// The same for a file's bytes already in memory; `name` names it in errors.
torch::serialize::InputArchive open_checkpoint_bytes(const std::string& bytes, const std::string& name,
                                                     c10::Device device);
// A checkpoint file's archive body, after its first line's format, size and SHA-256 are checked (our
// own code; nothing of LibTorch's reads it). Throws std::runtime_error naming `name`.
std::string verified_body(const std::string& bytes, const std::string& name);

// A LibTorch archive's bytes (a checkpoint's body, or a whole archive a recipe wrote itself with
// OutputArchive::save_to) after the same checks: storages against their data, tensors within their
// storage. Throws std::runtime_error naming `name`.
torch::serialize::InputArchive open_archive_body(const std::string& body, const std::string& name,
                                                 c10::Device device);

// Loads every part; any missing part, or a corrupt file, throws before any part is loaded.
void load_parts(const std::vector<CheckpointPart>& parts, const std::string& path, c10::Device device);

// Loads a module's state strictly: every parameter and buffer present with its shape, no key the
// module lacks. On a mismatch throws std::runtime_error listing missing, unexpected and wrongly
// shaped keys, before anything is modified.
void load_module_strict(torch::nn::Module& module, torch::serialize::InputArchive& archive);

// Opens the checkpoint at `path` on the CPU and loads its "model" part strictly into `module` (a
// bare, unwrapped model); throws when the file is unreadable, has no "model" part, or mismatches.
// The file may be a torchconform.checkpoint/2 or a plain LibTorch archive with a "model" entry
// (parsed in a child process under the parse limits first, as every checkpoint file is).
void load_model_part_strict(torch::nn::Module& module, const std::string& path);

using tc::sha256_hex;  // harness/util/sha256.h: SHA-256 of bytes, lower-case hex (OpenSSL)

}  // namespace tc::ref
