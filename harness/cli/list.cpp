// `torchconform list [--json] [--python SPEC]...`: the catalogue (checks, recipes, which checks must
// catch each broken variant, their language, devices). Exit 0; 2 for a --python spec refused.
#include <string>
#include <vector>

#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>

#include "harness/catalogue.h"
#include "harness/cli/common.h"
#include "harness/contract/registry.h"
#include "harness/devices.h"

namespace tc::cli {

Command add_list(CLI::App& app) {
  auto as_json = std::make_shared<bool>(false);
  auto python = std::make_shared<std::vector<std::string>>();
  auto* sub = app.add_subcommand("list", "List checks, recipes (and which checks must catch each "
                                         "broken variant) and devices. Exit 0");
  sub->add_flag("--json", *as_json, "Print the catalogue as JSON");
  sub->add_option("--python", *python, "Also list this Python recipe, FILE.py:CLASS[=NAME] (as `run --python`); repeatable");
  return {sub, [as_json, python] {
            load_python_recipes(*python);
            const Registry& reg = Registry::global();
            const int gpus = cuda_available() ? cuda_device_count() : 0;
            if (*as_json) {
              std::cout << catalogue_json(reg, gpus).dump(2) << '\n';
            } else {
              std::cout << render_catalogue_text(reg, gpus);
            }
            return 0;
          }};
}

}  // namespace tc::cli
