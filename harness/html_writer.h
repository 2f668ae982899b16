// A plain, self-contained HTML page listing a report's cells. Formats only.
#pragma once

#include <string>

#include "harness/record.h"

namespace tc {

std::string render_html(const Report& report);

}  // namespace tc
