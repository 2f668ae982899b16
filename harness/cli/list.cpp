// `torchconform list [--json] [--python SPEC]...`: the catalogue (checks, recipes, which checks must
// catch each broken variant, their language, devices). With --python, the file's recipes first: for
// each, which checks will judge it and which will skip it and why, from its class (a forecast: the
// run decides; harness/contract/recipe_outlook.h). Exit 0; 2 for a --python spec refused.
#include <string>
#include <vector>

#include <iostream>
#include <memory>
#include <sstream>

#include <CLI/CLI.hpp>

#include "harness/catalogue.h"
#include "harness/cli/common.h"
#include "harness/contract/recipe_outlook.h"
#include "harness/contract/registry.h"
#include "harness/contract/run.h"
#include "harness/devices.h"

namespace tc::cli {
namespace {

struct Outlooks {
  const RecipeInfo* recipe;
  std::vector<CheckOutlook> checks;
};

// The Python recipes `list` loaded, each with its outlook on the device `run --device auto` takes.
std::vector<Outlooks> python_outlooks(const Registry& reg, const std::string& device) {
  std::vector<std::string> checks;
  for (const CheckInfo& c : reg.checks()) checks.push_back(c.name);
  std::vector<Outlooks> out;
  for (const RecipeInfo& r : reg.recipes()) {
    if (r.language != "python") continue;
    std::vector<CheckOutlook> outlook;
    try {
      const std::unique_ptr<Run> run = r.make();
      if (const auto* o = dynamic_cast<const RecipeOutlook*>(run.get())) outlook = o->outlook(checks, device);
    } catch (const std::exception& e) {  // the class could not say: every check "if", with why
      for (const std::string& c : checks) outlook.push_back({c, "if", std::string("no outlook: ") + e.what()});
    }
    out.push_back({&r, std::move(outlook)});
  }
  return out;
}

std::string role_text(const RecipeInfo& r) {
  return r.is_variant() ? "a broken variant, must be caught by " + [&] {
    std::string t;
    for (const std::string& c : r.targets) t += (t.empty() ? "" : ", ") + c;
    return t;
  }() : r.control ? "a control (must pass)" : "a subject under test";
}

std::string render_outlooks(const std::vector<Outlooks>& all, const std::string& device) {
  std::ostringstream o;
  o << "Your recipes (--python), on " << device << " (from each class; the run decides):\n";
  for (const Outlooks& x : all) {
    const RecipeInfo& r = *x.recipe;
    o << "\n  " << r.name << "  " << r.file << ":" << r.line << ", " << role_text(r) << "\n";
    if (!r.description.empty()) o << "    " << r.description << "\n";
    std::string yes;
    int n_yes = 0;
    for (const CheckOutlook& c : x.checks) {
      if (c.judged == "yes") yes += (n_yes++ == 0 ? "" : ", ") + c.check;
    }
    o << "    judged by (" << n_yes << "): " << (yes.empty() ? "none" : yes) << "\n";
    for (const CheckOutlook& c : x.checks) {
      if (c.judged == "if") o << "    judged if " << c.why << ": " << c.check << "\n";
    }
    for (const CheckOutlook& c : x.checks) {
      if (c.judged == "no") o << "    skipped: " << c.check << ": " << c.why << "\n";
    }
  }
  return o.str();
}

nlohmann::json outlooks_json(const std::vector<Outlooks>& all, const std::string& device) {
  nlohmann::json out = nlohmann::json::array();
  for (const Outlooks& x : all) {
    nlohmann::json checks = nlohmann::json::array();
    for (const CheckOutlook& c : x.checks) checks.push_back({{"check", c.check}, {"judged", c.judged}, {"why", c.why}});
    out.push_back({{"name", x.recipe->name}, {"file", x.recipe->file}, {"line", x.recipe->line},
                   {"device", device}, {"checks", checks}});
  }
  return out;
}

}  // namespace

Command add_list(CLI::App& app) {
  auto as_json = std::make_shared<bool>(false);
  auto python = std::make_shared<std::vector<std::string>>();
  auto recipes = std::make_shared<std::vector<std::string>>();
  auto* sub = app.add_subcommand("list", "List checks, recipes (and which checks must catch each "
                                         "broken variant) and devices; with --python, the file's recipes "
                                         "first, each with the checks that will judge it and why others skip. Exit 0");
  sub->add_flag("--json", *as_json, "Print the catalogue as JSON (with --python: python_recipes, each check's outlook)");
  sub->add_option("--python", *python, "Also list this Python recipe, FILE.py[:CLASS[=NAME]] (as `run --python`); repeatable");
  sub->add_option("--recipe", *recipes,
                  "Also list these generated recipes (comma-separated, as `run --recipe`): gen-SEED, a draw with its "
                  "choices and the mutants that apply to it; gen-SEED-OPERATOR, gen-A..B, gen-A..B-*, gen-A..B-@CHECK "
                  "(docs/generated.md)");
  return {sub, [as_json, python, recipes] {
            load_python_recipes(*python);
            Registry::global().materialize(split_list(*recipes));
            const Registry& reg = Registry::global();
            const int gpus = cuda_available() ? cuda_device_count() : 0;
            const std::string device = gpus > 0 ? "cuda" : "cpu";
            const std::vector<Outlooks> outlooks = python->empty() ? std::vector<Outlooks>{} : python_outlooks(reg, device);
            if (*as_json) {
              nlohmann::json j = catalogue_json(reg, gpus);
              if (!python->empty()) j["python_recipes"] = outlooks_json(outlooks, device);
              std::cout << j.dump(2) << '\n';
            } else {
              if (!outlooks.empty()) std::cout << render_outlooks(outlooks, device) << "\n";
              std::cout << render_catalogue_text(reg, gpus);
            }
            return 0;
          }};
}

}  // namespace tc::cli
