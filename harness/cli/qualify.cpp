// `torchconform qualify`: the same short probes on every device at once, naming the device that is
// off the others (harness/qualify/, the device half in suites/qualify_probes/). Exit 0 none
// flagged, 1 a device flagged, 2 bad usage or launch failure.
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "harness/cli/common.h"
#include "harness/compare.h"
#include "harness/qualify/qualify.h"

namespace tc::cli {

Command add_qualify(CLI::App& app, int argc, char** argv) {
  struct Args {
    qualify::Args q;
    std::string floor = "30%";
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "qualify",
      "Run the same short probes on every device at once (matmul TFLOP/s, copy and host-to-device GB/s, "
      "all-reduce busbw, a same-seed training fingerprint) and name the device that is off the others: "
      "exit 0 none flagged, 1 a device flagged, 2 bad usage or launch failure (docs/qualify.md)");
  sub->add_option("--device", a->q.device, "cpu (N ranks with Gloo) | cuda (one rank per GPU, NCCL)")->capture_default_str();
  sub->add_option("--nproc", a->q.nproc, "Ranks (CPU default TORCHCONFORM_DIST_NPROC, else 2; CUDA default every GPU)");
  sub->add_option("--json", a->q.json_path, "Also write the report as JSON (torchconform.qualify/2)");
  sub->add_option("--html", a->q.html_path, "Also write the report as a self-contained HTML page");
  sub->add_option("--k", a->q.bounds.k, "Bound in MADs of the other ranks (scaled by 1.4826)")->capture_default_str();
  sub->add_option("--floor", a->floor, "Smallest bound, in percent of the other ranks' median")->capture_default_str();
  sub->add_option("--reps", a->q.repetitions, "Repetitions of each probe (the median is judged)")->capture_default_str();
  sub->add_option("--timeout", a->q.timeout_s,
                  "Seconds before the torchrun launch is killed (default TORCHCONFORM_QUALIFY_TIMEOUT_S, else 300)");
  sub->add_option("--raw", a->q.raw_path, "")->group("");  // internal: a launched rank 0 hands its figures back
  return {sub, [a, argc, argv] {
            a->q.bounds.floor = parse_percent(a->floor);
            const Report header = report_header(argc, argv, 0, nlohmann::json::array({a->q.device}));
            return qualify::run_command(
                a->q, {{"tool", header.tool}, {"run", header.run}, {"environment", header.environment}},
                self_executable());
          }};
}

}  // namespace tc::cli
