#include "reference/checkpoint.h"

#include <openssl/evp.h>

#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <torch/torch.h>

#include "harness/atomic_file.h"

namespace tc::ref {
namespace {

std::string clean(const c10::Error& e) { return e.what_without_backtrace(); }

// Collects, without touching the module, how `archive` differs from `module`'s state.
void compare_state(torch::nn::Module& module, torch::serialize::InputArchive& archive,
                   const std::string& prefix, std::vector<std::string>& missing,
                   std::vector<std::string>& unexpected, std::vector<std::string>& wrong_shape) {
  std::set<std::string> known;
  auto check_tensor = [&](const std::string& name, const at::Tensor& expected) {
    known.insert(name);
    at::Tensor stored;
    if (!archive.try_read(name, stored)) {
      missing.push_back(prefix + name);
    } else if (stored.sizes() != expected.sizes()) {
      std::ostringstream s;
      s << prefix << name << " " << stored.sizes() << " vs " << expected.sizes();
      wrong_shape.push_back(s.str());
    }
  };
  for (const auto& p : module.named_parameters(/*recurse=*/false)) check_tensor(p.key(), p.value());
  for (const auto& b : module.named_buffers(/*recurse=*/false)) check_tensor(b.key(), b.value());
  for (const auto& child : module.named_children()) {
    known.insert(child.key());
    torch::serialize::InputArchive sub;
    if (!archive.try_read(child.key(), sub)) {
      missing.push_back(prefix + child.key() + ".*");
      continue;
    }
    compare_state(*child.value(), sub, prefix + child.key() + ".", missing, unexpected, wrong_shape);
  }
  for (const std::string& k : archive.keys()) {
    if (!known.count(k)) unexpected.push_back(prefix + k);
  }
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size() && i < 8; ++i) out += (i ? ", " : "") + v[i];
  if (v.size() > 8) out += ", ... (" + std::to_string(v.size()) + " in all)";
  return out;
}

}  // namespace

std::string sha256_hex(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("SHA-256 failed (OpenSSL)");
  }
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

torch::serialize::OutputArchive checkpoint_archive(const std::vector<CheckpointPart>& parts) {
  torch::serialize::OutputArchive inner;
  for (const CheckpointPart& part : parts) {
    torch::serialize::OutputArchive sub;
    part.save(sub);
    inner.write(part.name, sub);
  }
  std::ostringstream payload;
  inner.save_to(payload);
  const std::string bytes = payload.str();

  torch::serialize::OutputArchive outer;
  outer.write("format", c10::IValue(std::string(kCheckpointFormat)));
  outer.write("sha256", c10::IValue(sha256_hex(bytes)));
  outer.write("payload", torch::from_blob(const_cast<char*>(bytes.data()),
                                          {static_cast<int64_t>(bytes.size())}, torch::kUInt8)
                             .clone());
  return outer;
}

std::string checkpoint_bytes(const std::vector<CheckpointPart>& parts) {
  std::ostringstream file;
  checkpoint_archive(parts).save_to(file);
  return file.str();
}

void save_parts(const std::vector<CheckpointPart>& parts, const std::string& path) {
  write_file_atomically(path, checkpoint_bytes(parts));
}

torch::serialize::InputArchive open_checkpoint(const std::string& path, c10::Device device) {
  torch::serialize::InputArchive outer;
  try {
    outer.load_from(path, torch::Device(torch::kCPU));
  } catch (const c10::Error& e) {
    throw std::runtime_error("cannot read checkpoint '" + path + "' (truncated or not a checkpoint): " + clean(e));
  }
  c10::IValue format, hash;
  at::Tensor payload;
  try {
    if (!outer.try_read("format", format) || !format.isString() ||
        format.toStringRef() != kCheckpointFormat) {
      throw std::runtime_error("checkpoint '" + path + "' is not a " + kCheckpointFormat + " file");
    }
    if (!outer.try_read("sha256", hash) || !hash.isString() || !outer.try_read("payload", payload) ||
        payload.scalar_type() != torch::kUInt8 || payload.dim() != 1) {
      throw std::runtime_error("checkpoint '" + path + "' lacks its hash or payload");
    }
  } catch (const c10::Error& e) {
    throw std::runtime_error("checkpoint '" + path + "' is corrupt: " + clean(e));
  }
  payload = payload.contiguous();
  const std::string bytes(static_cast<const char*>(payload.data_ptr()), static_cast<size_t>(payload.numel()));
  if (sha256_hex(bytes) != hash.toStringRef()) {
    throw std::runtime_error("checkpoint '" + path + "' is corrupt: its content does not match its SHA-256");
  }
  torch::serialize::InputArchive inner;
  try {
    inner.load_from(bytes.data(), bytes.size(), device);
  } catch (const c10::Error& e) {
    throw std::runtime_error("checkpoint '" + path + "' has an unreadable payload: " + clean(e));
  }
  return inner;
}

void load_parts(const std::vector<CheckpointPart>& parts, const std::string& path, c10::Device device) {
  torch::serialize::InputArchive root = open_checkpoint(path, device);
  std::vector<torch::serialize::InputArchive> subs(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!root.try_read(parts[i].name, subs[i])) {
      throw std::runtime_error("checkpoint '" + path + "' has no '" + parts[i].name + "' state");
    }
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    try {
      parts[i].load(subs[i]);
    } catch (const c10::Error& e) {
      throw std::runtime_error("checkpoint '" + path + "': cannot load its '" + parts[i].name +
                               "' state: " + clean(e));
    } catch (const std::exception& e) {
      throw std::runtime_error("checkpoint '" + path + "': cannot load its '" + parts[i].name +
                               "' state: " + e.what());
    }
  }
}

void load_module_strict(torch::nn::Module& module, torch::serialize::InputArchive& archive) {
  std::vector<std::string> missing, unexpected, wrong_shape;
  compare_state(module, archive, "", missing, unexpected, wrong_shape);
  if (!missing.empty() || !unexpected.empty() || !wrong_shape.empty()) {
    std::string msg = "model state does not match the model:";
    if (!missing.empty()) msg += " missing " + join(missing) + ";";
    if (!unexpected.empty()) msg += " unexpected " + join(unexpected) + ";";
    if (!wrong_shape.empty()) msg += " wrong shape " + join(wrong_shape) + ";";
    throw std::runtime_error(msg);
  }
  module.load(archive);
}

}  // namespace tc::ref
