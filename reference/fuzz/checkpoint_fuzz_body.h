// The checkpoint loader's fuzz bodies, shared by the libFuzzer targets
// (reference/fuzz/checkpoint_fuzz.cpp) and the replay of committed crashers under ctest
// (Fuzz.CheckpointRegressionsReplay).
//
// Contract under test: any bytes either open as a checkpoint whose every tensor can be read in
// full, or throw std::runtime_error; never another exception, a crash, a hang or a memory error.
//   checkpoint_file_one:    the bytes are the whole file (our first line, then the archive)
//   checkpoint_archive_one: the bytes are the archive; the first line is made for them with the
//                           right hash and size, so every input reaches LibTorch's zip reader and
//                           unpickler (a file made by someone who recomputed the hash)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <torch/torch.h>

#include "reference/checkpoint.h"

namespace tc::fuzz {

// Reads every byte of every tensor's storage (in instrumented code, so that AddressSanitizer sees
// a storage that reaches past its allocation), recursively through sub-archives.
inline uint64_t touch_all(const c10::IValue& v, int depth) {
  uint64_t sum = 0;
  if (depth > 300) return 0;
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (t.defined() && t.has_storage() && t.device().is_cpu() && t.storage().data() != nullptr) {
      const auto* p = static_cast<const uint8_t*>(t.storage().data());
      for (size_t i = 0; i < t.storage().nbytes(); ++i) sum += p[i];
    }
  } else if (v.isObject()) {
    for (const c10::IValue& s : v.toObject()->slots()) sum += touch_all(s, depth + 1);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) sum += touch_all(e, depth + 1);
  } else if (v.isTuple()) {
    for (const c10::IValue& e : v.toTupleRef().elements()) sum += touch_all(e, depth + 1);
  } else if (v.isGenericDict()) {
    for (const auto& kv : v.toGenericDict()) sum += touch_all(kv.key(), depth + 1) + touch_all(kv.value(), depth + 1);
  }
  return sum;
}

inline bool open_and_touch(const std::string& file) {
  try {
    torch::serialize::InputArchive archive = ref::open_checkpoint_bytes(file, "fuzz-input", torch::kCPU);
    for (const std::string& key : archive.keys()) {
      c10::IValue v;
      if (archive.try_read(key, v)) (void)touch_all(v, 0);
    }
    return true;
  } catch (const std::runtime_error&) {
    return false;
  }
}

inline bool checkpoint_file_one(const uint8_t* data, size_t size) {
  return open_and_touch(std::string(reinterpret_cast<const char*>(data), size));
}

inline bool checkpoint_archive_one(const uint8_t* data, size_t size) {
  return open_and_touch(ref::checkpoint_file_bytes(std::string(reinterpret_cast<const char*>(data), size)));
}

}  // namespace tc::fuzz
