// SHA-256 (OpenSSL) for the integrity fields of checkpoints and reports.
#pragma once

#include <string>

namespace tc {

// SHA-256 of `bytes`, lower-case hex (64 characters).
std::string sha256_hex(const std::string& bytes);

}  // namespace tc
