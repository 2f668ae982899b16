// Self-contained HTML reporter of a Comparison (`torchconform compare --html PATH`). Formats only.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "harness/compare.h"

namespace tc {

std::string render_compare_html(const Comparison& c);

// The "Environment" section of a page comparing two runs (compare's, ab's): "identical", or a table
// of the keys that differ.
void environment_section(std::ostringstream& h, const std::vector<EnvChange>& changes);

}  // namespace tc
