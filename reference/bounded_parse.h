// Parsing a file the project did not just write, in a child process under a memory and a time
// limit: LibTorch's zip reader and unpickler allocate what a file declares before anything can be
// checked (a crafted archive has cost 17 s and 4.2 GB inside them), so a hostile checkpoint must
// not reach them in the process that runs the checks. The child parses and answers; the parent
// parses only a file the child read within the limits.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace tc::ref {

struct ParseLimits {
  uint64_t memory_mib = 4096;  // address space the parse may add, MiB
  double seconds = 60.0;       // wall-clock time of the parse
};

// The limits from TORCHCONFORM_PARSE_MEMORY_MB and TORCHCONFORM_PARSE_SECONDS (the defaults above
// where unset; `torchconform run --parse-memory-mb/--parse-seconds` sets them). Throws
// std::runtime_error naming the variable for a value that is not a positive number.
ParseLimits parse_limits();

// Runs `parse` in a forked child under `limits`. Returns normally when the child's parse returned;
// throws std::runtime_error with the child's own error text when it threw, and a message naming the
// limit (and `what`) when it ran out of memory or time or died; nothing of the child's state
// reaches this process.
void parse_in_child(const std::string& what, const ParseLimits& limits, const std::function<void()>& parse);

}  // namespace tc::ref
