// Atomic file replacement: temporary file in the same directory, write, fsync, rename.
#pragma once

#include <string>

namespace tc {

// Writes `content` (any bytes) to `path` so that a reader sees either the previous file or the
// whole new one, never a part: a failed or interrupted write leaves the previous file intact.
// Throws std::runtime_error naming the path, the step and the reason.
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace tc
