// SHA-256 (OpenSSL) for the integrity fields of checkpoints and reports, and the digest of a
// cell's trained parameters (suites/support/fingerprint.h).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace tc {

// SHA-256 of `bytes`, lower-case hex (64 characters).
std::string sha256_hex(const std::string& bytes);

// The same digest fed in pieces (for data too large to copy into one string): feeding "ab" then
// "c" gives sha256_hex("abc").
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t size);
  void update(const std::string& bytes) { update(bytes.data(), bytes.size()); }
  // The digest of everything fed so far, lower-case hex; the object is spent afterwards.
  std::string hex();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

}  // namespace tc
