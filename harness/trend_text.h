// Plain-text reporter of a Trend (stdout of `torchconform trend`). Formats only.
#pragma once

#include <string>

#include "harness/trend.h"

namespace tc {

std::string render_trend_text(const Trend& t);

}  // namespace tc
