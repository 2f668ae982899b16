// Plain-text reporter of a Comparison (stdout of `torchconform compare`). Formats only.
#pragma once

#include <string>

#include "harness/compare.h"

namespace tc {

std::string render_compare_text(const Comparison& c);
// The one-line gate verdict, e.g. "gate: FAIL (1 benchmark regressed, 0 verdicts worse)".
std::string gate_line(const Comparison& c);
// The numerics rule in one sentence (classes, float rounding, the tolerance, the gate) and one
// numerics result in words ("step 3 beyond 0.0977%: loss 1.2 vs 1.3; ..."): shared with the HTML.
std::string numerics_rule(const CompareOptions& o);
std::string describe_numerics(const NumericsChange& n);

}  // namespace tc
