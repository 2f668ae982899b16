// `torchconform report RUN.json --html PATH`: renders a report as HTML. Exit 0, 2 bad input.
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "harness/cli/common.h"
#include "harness/html_writer.h"
#include "harness/report_json.h"

namespace tc::cli {

Command add_report(CLI::App& app) {
  struct Args {
    std::string in, html;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("report", "Render a report JSON as HTML. Exit 0, 2 bad input");
  sub->add_option("RUN.json", a->in, "A report written by `run`")->required();
  sub->add_option("--html", a->html, "Output HTML path")->required();
  return {sub, [a] {
            write_output(a->html, render_html(read_report_file(a->in)));
            return 0;
          }};
}

}  // namespace tc::cli
