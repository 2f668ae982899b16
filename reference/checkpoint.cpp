#include "reference/checkpoint.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/api/compilation_unit.h>
#include <torch/csrc/jit/serialization/unpickler.h>
#include <torch/torch.h>

#include "harness/util/atomic_file.h"

namespace tc::ref {
namespace {

std::string clean(const c10::Error& e) { return e.what_without_backtrace(); }

// Collects, without touching the module, how `archive` differs from `module`'s state.
void compare_state(torch::nn::Module& module, torch::serialize::InputArchive& archive,
                   const std::string& prefix, std::vector<std::string>& missing,
                   std::vector<std::string>& unexpected, std::vector<std::string>& wrong_shape,
                   std::vector<std::string>& wrong_dtype) {
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
    } else if (stored.scalar_type() != expected.scalar_type()) {
      // Module::load would copy_ into a tensor of the other element size and fail with a storage
      // bounds message that names neither tensor nor dtype.
      wrong_dtype.push_back("'" + prefix + name + "': checkpoint has " + c10::toString(stored.scalar_type()) +
                            ", model has " + c10::toString(expected.scalar_type()));
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
    compare_state(*child.value(), sub, prefix + child.key() + ".", missing, unexpected, wrong_shape,
                  wrong_dtype);
  }
  for (const std::string& k : archive.keys()) {
    if (!known.count(k)) unexpected.push_back(prefix + k);
  }
}

// A tensor's view must lie within its storage. LibTorch's unpickler sets sizes, strides and offset
// from the file without comparing them with the storage it read, so a crafted file can describe a
// tensor larger than its data; reading it would read out of bounds.
void check_tensor_in_storage(const at::Tensor& t, const std::string& where) {
  if (!t.defined()) return;
  if (t.layout() != at::kStrided) throw std::runtime_error(where + ": a tensor that is not strided");
  if (!t.has_storage()) throw std::runtime_error(where + ": a tensor without storage");
  if (t.numel() == 0) return;
  using u128 = unsigned __int128;
  if (t.storage_offset() < 0) throw std::runtime_error(where + ": a negative storage offset");
  u128 last = static_cast<u128>(t.storage_offset());
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.stride(d) < 0) throw std::runtime_error(where + ": a negative stride");
    last += static_cast<u128>(t.size(d) - 1) * static_cast<u128>(t.stride(d));
  }
  const u128 needed = (last + 1) * static_cast<u128>(t.element_size());
  if (needed > static_cast<u128>(t.storage().nbytes())) {
    std::ostringstream s;
    s << where << ": a tensor of sizes " << t.sizes() << ", strides " << t.strides() << " and offset "
      << t.storage_offset() << " needs " << static_cast<uint64_t>(needed) << " bytes of a storage of "
      << t.storage().nbytes() << " (declared size and data disagree)";
    throw std::runtime_error(s.str());
  }
}

// Walks at most kMaxNodes values: a pickle can share one list many times over (memo references),
// so that a plain walk of a small file would visit 2^depth values.
constexpr size_t kMaxNodes = 1'000'000;

void check_ivalue_bounds(const c10::IValue& v, const std::string& where, int depth, size_t& visited) {
  if (depth > 200) throw std::runtime_error(where + ": nested more than 200 levels deep");
  if (++visited > kMaxNodes) throw std::runtime_error("more than a million values in the archive");
  if (v.isTensor()) {
    check_tensor_in_storage(v.toTensor(), where);
  } else if (v.isObject()) {
    auto obj = v.toObject();
    for (size_t i = 0; i < obj->slots().size(); ++i) {
      const std::string name = i < obj->type()->numAttributes() ? obj->type()->getAttributeName(i) : "?";
      check_ivalue_bounds(obj->getSlot(i), where + "." + name, depth + 1, visited);
    }
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) check_ivalue_bounds(e, where + "[]", depth + 1, visited);
  } else if (v.isTuple()) {
    for (const c10::IValue& e : v.toTupleRef().elements()) check_ivalue_bounds(e, where + "()", depth + 1, visited);
  } else if (v.isGenericDict()) {
    for (const auto& kv : v.toGenericDict()) {
      check_ivalue_bounds(kv.key(), where + "{}", depth + 1, visited);
      check_ivalue_bounds(kv.value(), where + "{}", depth + 1, visited);
    }
  }
}

// Every storage's declared size (numel x element size, from the pickle) equals its record's size.
// LibTorch's unpickler builds a storage of the declared size over the record's bytes without
// comparing the two, so a record shorter than declared gives a storage that reaches past its
// allocation (seen with torch 2.15: the load succeeds). This runs LibTorch's own unpickler over the
// archive's data.pkl once more, with our record reader, which notes each record's size by address,
// and types and objects that are only placeholders (nothing is constructed, no code is looked up).
void collect_tensors(const c10::IValue& v, std::vector<at::Tensor>& out, int depth, size_t& visited) {
  if (depth > 200) throw std::runtime_error("nested more than 200 levels deep");
  if (++visited > kMaxNodes) throw std::runtime_error("more than a million values in the archive");
  if (v.isTensor()) {
    out.push_back(v.toTensor());
  } else if (v.isObject()) {
    for (const c10::IValue& s : v.toObject()->slots()) collect_tensors(s, out, depth + 1, visited);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) collect_tensors(e, out, depth + 1, visited);
  } else if (v.isTuple()) {
    for (const c10::IValue& e : v.toTupleRef().elements()) collect_tensors(e, out, depth + 1, visited);
  } else if (v.isGenericDict()) {
    for (const auto& kv : v.toGenericDict()) {
      collect_tensors(kv.key(), out, depth + 1, visited);
      collect_tensors(kv.value(), out, depth + 1, visited);
    }
  }
}

void check_storages_match_records(const std::string& body) {
  std::istringstream in(body);
  caffe2::serialize::PyTorchStreamReader reader(&in);
  // LibTorch allocates a record's size as its zip directory states it before reading the record, so
  // a few changed bytes there could make it allocate gigabytes. A precaution, not a fix for a seen
  // failure: the records torchconform writes are small (tensor data stored, code deflated), and
  // none states more bytes than the whole archive.
  for (const std::string& name : reader.getAllRecords()) {
    const size_t size = reader.getRecordSize(name);
    if (size > body.size()) {
      throw std::runtime_error("its record '" + name + "' claims " + std::to_string(size) +
                               " bytes, more than the whole archive (" + std::to_string(body.size()) + ")");
    }
  }
  at::DataPtr pickle;
  size_t pickle_size = 0;
  std::tie(pickle, pickle_size) = reader.getRecord("data.pkl");
  const char* pickle_bytes = static_cast<const char*>(pickle.get());
  size_t pos = 0;
  auto read = [&](char* buf, size_t n) {
    n = std::min(n, pickle_size - pos);
    std::memcpy(buf, pickle_bytes + pos, n);
    pos += n;
    return n;
  };
  std::map<const void*, size_t> record_size;
  auto read_record = [&](const std::string& key) {
    auto [data, size] = reader.getRecord("data/" + key);
    record_size[data.get()] = size;
    return std::move(data);
  };
  auto cu = std::make_shared<torch::jit::CompilationUnit>();
  auto resolve = [&](const c10::QualifiedName& name) {
    if (auto t = cu->get_class(name)) return c10::StrongTypePtr(cu, t);
    auto t = c10::ClassType::create(name, cu);
    cu->register_type(t);
    return c10::StrongTypePtr(cu, t);
  };
  std::vector<c10::IValue> states;
  auto load_object = [&](const c10::StrongTypePtr& type, c10::IValue state) {
    states.push_back(std::move(state));
    return c10::ivalue::Object::create(type, 0);
  };
  torch::jit::Unpickler unpickler(read, resolve, load_object, read_record, c10::Device(c10::kCPU));
  unpickler.set_version(reader.version());
  states.push_back(unpickler.parse_ivalue());
  std::vector<at::Tensor> tensors;
  size_t visited = 0;
  for (const c10::IValue& s : states) collect_tensors(s, tensors, 0, visited);
  for (const at::Tensor& t : tensors) {
    if (!t.defined() || !t.has_storage() || t.storage().nbytes() == 0) continue;
    auto it = record_size.find(t.storage().data());
    if (it == record_size.end()) throw std::runtime_error("a tensor whose data is not one of the archive's records");
    if (it->second != t.storage().nbytes()) {
      throw std::runtime_error("a storage declared as " + std::to_string(t.storage().nbytes()) +
                               " bytes whose data is " + std::to_string(it->second) +
                               " bytes (declared size and data disagree)");
    }
  }
}

void check_tensor_bounds(torch::serialize::InputArchive& archive) {
  size_t visited = 0;
  for (const std::string& key : archive.keys()) {
    c10::IValue v;
    if (archive.try_read(key, v)) check_ivalue_bounds(v, key, 0, visited);
  }
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size() && i < 8; ++i) out += (i ? ", " : "") + v[i];
  if (v.size() > 8) out += ", ... (" + std::to_string(v.size()) + " in all)";
  return out;
}

}  // namespace

torch::serialize::OutputArchive checkpoint_archive(const std::vector<CheckpointPart>& parts) {
  torch::serialize::OutputArchive archive;
  for (const CheckpointPart& part : parts) {
    torch::serialize::OutputArchive sub;
    part.save(sub);
    archive.write(part.name, sub);
  }
  return archive;
}

std::string checkpoint_file_bytes(const std::string& body) {
  return std::string(kCheckpointFormat) + " sha256=" + sha256_hex(body) + " bytes=" +
         std::to_string(body.size()) + "\n" + body;
}

std::string checkpoint_bytes(const std::vector<CheckpointPart>& parts) {
  std::ostringstream body;
  checkpoint_archive(parts).save_to(body);
  return checkpoint_file_bytes(body.str());
}

void save_parts(const std::vector<CheckpointPart>& parts, const std::string& path) {
  write_file_atomically(path, checkpoint_bytes(parts));
}

torch::serialize::InputArchive open_checkpoint(const std::string& path, c10::Device device) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read checkpoint '" + path + "': " + std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  if (in.bad()) throw std::runtime_error("cannot read checkpoint '" + path + "': read error");
  return open_checkpoint_bytes(bytes, path, device);
}

torch::serialize::InputArchive open_checkpoint_bytes(const std::string& bytes, const std::string& path,
                                                     c10::Device device) {
  // 1. The line, the size and the hash, in our code, before LibTorch parses a byte.
  const std::string head = std::string(kCheckpointFormat) + " sha256=";
  if (bytes.compare(0, 4, "PK\x03\x04") == 0) {
    throw std::runtime_error("checkpoint '" + path + "' is a bare LibTorch archive, not a " +
                             kCheckpointFormat + " file (torchconform.checkpoint/1 from an older "
                             "torchconform, or torch::save): save it again with this version");
  }
  if (bytes.compare(0, head.size(), head) != 0) {
    throw std::runtime_error("checkpoint '" + path + "' is not a " + kCheckpointFormat +
                             " file (its first line is not '" + kCheckpointFormat + " sha256=...')");
  }
  const size_t hash_at = head.size();
  const std::string size_tag = " bytes=";
  size_t pos = hash_at + 64;
  bool ok = bytes.size() > pos && bytes.compare(pos, size_tag.size(), size_tag) == 0;
  for (size_t i = hash_at; ok && i < hash_at + 64; ++i) {
    ok = (bytes[i] >= '0' && bytes[i] <= '9') || (bytes[i] >= 'a' && bytes[i] <= 'f');
  }
  uint64_t declared = 0;
  size_t digits = 0;
  if (ok) {
    pos += size_tag.size();
    for (; pos < bytes.size() && bytes[pos] >= '0' && bytes[pos] <= '9' && digits < 19; ++pos, ++digits) {
      declared = declared * 10 + static_cast<uint64_t>(bytes[pos] - '0');
    }
    ok = digits > 0 && pos < bytes.size() && bytes[pos] == '\n' &&
         !(digits > 1 && bytes[pos - digits] == '0');
  }
  if (!ok) {
    throw std::runtime_error("checkpoint '" + path + "' is corrupt: its first line is not '" +
                             kCheckpointFormat + " sha256=<64 hex digits> bytes=<size>'");
  }
  const size_t body_at = pos + 1;
  const uint64_t actual = bytes.size() - body_at;
  if (actual != declared) {
    throw std::runtime_error("checkpoint '" + path + "' is " +
                             (actual < declared ? "truncated" : "corrupt") + ": " +
                             std::to_string(actual) + " bytes after its first line, which declares " +
                             std::to_string(declared));
  }
  const std::string body = bytes.substr(body_at);
  if (sha256_hex(body) != bytes.substr(hash_at, 64)) {
    throw std::runtime_error("checkpoint '" + path + "' is corrupt: its content does not match its SHA-256");
  }
  // 2. LibTorch parses it (reached only by a file whose hash was computed over its content):
  //    first the storages' declared sizes against their data, then the archive itself.
  try {
    check_storages_match_records(body);
  } catch (const c10::Error& e) {
    throw std::runtime_error("checkpoint '" + path + "' has an unreadable archive: " + clean(e));
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("checkpoint '" + path + "' is malformed: " + e.what());
  }
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(body.data(), body.size(), device);
  } catch (const c10::Error& e) {
    throw std::runtime_error("checkpoint '" + path + "' has an unreadable archive: " + clean(e));
  } catch (const std::exception& e) {
    throw std::runtime_error("checkpoint '" + path + "' has an unreadable archive: " + e.what());
  }
  // 3. Every tensor within its storage, before anything reads a tensor's data.
  try {
    check_tensor_bounds(archive);
  } catch (const c10::Error& e) {
    throw std::runtime_error("checkpoint '" + path + "' is malformed: " + clean(e));
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("checkpoint '" + path + "' is malformed: " + e.what());
  }
  return archive;
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
  std::vector<std::string> missing, unexpected, wrong_shape, wrong_dtype;
  compare_state(module, archive, "", missing, unexpected, wrong_shape, wrong_dtype);
  if (!missing.empty() || !unexpected.empty() || !wrong_shape.empty() || !wrong_dtype.empty()) {
    std::string msg = "model state does not match the model:";
    if (!missing.empty()) msg += " missing " + join(missing) + ";";
    if (!unexpected.empty()) msg += " unexpected " + join(unexpected) + ";";
    if (!wrong_shape.empty()) msg += " wrong shape " + join(wrong_shape) + ";";
    if (!wrong_dtype.empty()) msg += " wrong dtype " + join(wrong_dtype) + ";";
    throw std::runtime_error(msg);
  }
  module.load(archive);
}

void load_model_part_strict(torch::nn::Module& module, const std::string& path) {
  torch::serialize::InputArchive root = open_checkpoint(path, torch::kCPU);
  torch::serialize::InputArchive model;
  if (!root.try_read("model", model)) throw std::runtime_error("the checkpoint has no 'model' state");
  load_module_strict(module, model);
}

}  // namespace tc::ref
