// `torchconform qualify`: which device of a machine (or of a torchrun job) is the odd one out.
// Every rank runs the registered probes (suites/qualify_probes, through harness/contract/qualify_probe.h)
// at the same time; rank 0 gathers them, judges them (harness/qualify/assess.h) and reports.
//
// Outside torchrun this launches torchrun on this binary (one rank per GPU with --device cuda, N CPU
// ranks with Gloo otherwise) with a deadline, reads back rank 0's gathered figures and judges and
// reports them here; under a torchrun of the user's own (RANK/WORLD_SIZE set) every rank is a
// worker and rank 0 judges and reports. docs/qualify.md has the report schema and the hooks.
//
// Exit 0: no device flagged; 1: a device flagged; 2: bad usage, launch or probe failure.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/qualify/assess.h"

namespace tc::qualify {

struct Args {
  int nproc = 0;              // CPU ranks (0: TORCHCONFORM_DIST_NPROC, else 2); CUDA: at most the GPUs
  std::string device = "cpu";
  std::string json_path;      // '' skips
  std::string html_path;      // '' skips
  Bounds bounds;
  int repetitions = 5;
  int timeout_s = 0;          // the launch's deadline (0: TORCHCONFORM_QUALIFY_TIMEOUT_S, else 300)
  std::string raw_path;       // internal: the launched rank 0 writes the gathered figures here
};

struct Report {
  nlohmann::json header;  // tool, run, environment (as the CLI makes them)
  std::vector<RankResult> ranks;
  Bounds bounds;
  Assessment assessment;
  int exit_code() const { return assessment.flags.empty() ? 0 : 1; }
};

// The whole command; `header` is what every report starts with (tool, run, environment).
int run_command(const Args& args, const nlohmann::json& header, const std::string& self_executable);

// Reporters (harness/qualify/qualify_report.cpp): format only.
std::string render_text(const Report& r);
nlohmann::json report_json(const Report& r);  // "schema": "torchconform.qualify/2"
std::string render_html(const Report& r);

}  // namespace tc::qualify
