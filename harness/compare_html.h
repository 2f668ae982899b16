// Self-contained HTML reporter of a Comparison (`torchconform compare --html PATH`). Formats only.
#pragma once

#include <string>

#include "harness/compare.h"

namespace tc {

std::string render_compare_html(const Comparison& c);

}  // namespace tc
