// Plain-text reporter of a Comparison (stdout of `torchconform compare`). Formats only.
#pragma once

#include <string>

#include "harness/compare.h"

namespace tc {

std::string render_compare_text(const Comparison& c);
// The one-line gate verdict, e.g. "gate: FAIL (1 benchmark regressed, 0 verdicts worse)".
std::string gate_line(const Comparison& c);

}  // namespace tc
