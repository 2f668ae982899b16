// Console (stderr/stdout) formatting of cells and summaries. Formats only.
#pragma once

#include <ostream>
#include <vector>

#include "harness/contract/record.h"

namespace tc {

// One progress line for a finished cell: "[ 3/36] ok       reproducibility / no_seed / cpu  (1.2 s)".
void print_cell_line(std::ostream& os, const Cell& cell, size_t index, size_t total);

// The matrix check x recipe for one device, verdicts in the cells, then the summary counts.
void print_summary(std::ostream& os, const std::vector<Cell>& cells,
                   const std::vector<NotApplicable>& not_applicable = {});

// Once per check whose declared detection (DetectsByThrowing) matched an error other checks' cells
// threw (metrics.error_owned_by): which recipes, how many cells, and that this check owns the
// practice. Nothing when none did. print_summary ends with it.
void print_error_owners(std::ostream& os, const std::vector<Cell>& cells);

}  // namespace tc
