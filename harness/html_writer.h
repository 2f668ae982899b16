// The run report as one self-contained HTML page (inline CSS and SVG; no scripts, fonts or
// network): environment, the check x recipe matrix per device with each cell's evidence a click
// away (<details>), the loss curves that reproducibility and resume_equality compared drawn
// overlaid with the first divergence marked, skipped cells with their reasons, benchmark medians
// with their spread. Every cell element carries data-check / data-recipe / data-device.
// Formats only.
#pragma once

#include <string>

#include "harness/contract/record.h"

namespace tc {

std::string render_html(const Report& report);

}  // namespace tc
