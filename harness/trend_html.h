// Self-contained HTML of a Trend (`torchconform trend ... --html PATH`): one inline-SVG chart per
// benchmark, medians over runs, the start of a persistent step change marked. Formats only.
#pragma once

#include <string>

#include "harness/trend.h"

namespace tc {

std::string render_trend_html(const Trend& t);

}  // namespace tc
