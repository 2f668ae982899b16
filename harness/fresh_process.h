// A part of a cell's check run in a fresh process of this program (CheckContext::in_fresh_process):
// the runner starts `<executable> run --check C --recipe R --device D --seed S --part P --json F`,
// where the check sees ctx.part == P and returns what it measured as its metrics, and hands those
// metrics back. What a process fixes once (a value read from std::random_device into a static, an
// address-derived key, a per-process salt) is the same for two runs in one process and differs
// between processes. The child is started with posix_spawn (nothing runs between fork and exec in
// a process that may have threads) and killed after TORCHCONFORM_FRESH_PROCESS_TIMEOUT_S (default
// 300). No torch here.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "harness/contract/registry.h"

namespace tc {

// Runs `part` of ctx's cell in a fresh process of `executable` (this program) and returns the
// metrics the check returned there. Throws HarnessError when no result came back (the child's log
// tail in the message), SkipCell when the child skipped the cell, std::runtime_error with the
// child's evidence when the check failed there (the recipe failing under test).
nlohmann::json run_part_in_fresh_process(const std::string& executable, const CheckContext& ctx,
                                         const std::string& part);

}  // namespace tc
