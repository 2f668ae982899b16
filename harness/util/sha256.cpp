#include "harness/util/sha256.h"

#include <openssl/evp.h>

#include <stdexcept>

namespace tc {

namespace {
std::string to_hex(const unsigned char* digest, unsigned len) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(2 * len);
  for (unsigned i = 0; i < len; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}
}  // namespace

std::string sha256_hex(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("SHA-256 failed (OpenSSL)");
  }
  return to_hex(digest, len);
}

struct Sha256::Ctx {
  EVP_MD_CTX* md = nullptr;
  bool done = false;
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
  ctx_->md = EVP_MD_CTX_new();
  if (ctx_->md == nullptr || EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx_->md);
    throw std::runtime_error("SHA-256 failed (OpenSSL)");
  }
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_->md); }

void Sha256::update(const void* data, size_t size) {
  if (ctx_->done) throw std::logic_error("Sha256::update after hex()");
  if (size > 0 && EVP_DigestUpdate(ctx_->md, data, size) != 1) throw std::runtime_error("SHA-256 failed (OpenSSL)");
}

std::string Sha256::hex() {
  if (ctx_->done) throw std::logic_error("Sha256::hex called twice");
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx_->md, digest, &len) != 1) throw std::runtime_error("SHA-256 failed (OpenSSL)");
  ctx_->done = true;
  return to_hex(digest, len);
}

}  // namespace tc
