#include "suites/support/kit.h"

#include "harness/util/text_format.h"

namespace tc {

std::string probe_missing_reason(const CheckContext& ctx, const std::string& interface, const std::string& why) {
  const RecipeInfo* info = Registry::global().find_recipe(ctx.recipe);
  if (info != nullptr && info->language == "python") {
    return "the Python recipe '" + ctx.recipe + "': torchconform.Run has no method through which " + ctx.check +
           " drives it yet" + (why.empty() ? "" : ", so " + why) + " (docs/python.md lists what a Python recipe provides)";
  }
  return "recipe '" + ctx.recipe + "' does not implement " + interface + (why.empty() ? "" : ", so " + why);
}

std::unique_ptr<Run> fresh_run(const CheckContext& ctx, const RunOptions& options) {
  std::unique_ptr<Run> r = ctx.make_run();
  r->setup(options);
  return r;
}

void Findings::held(const std::string& promise, const std::string& evidence) {
  entries_.push_back({promise, "held", evidence});
}

void Findings::broken(const std::string& promise, const std::string& evidence) {
  entries_.push_back({promise, "broken", evidence});
}

namespace {
nlohmann::json measure(double deviation, double bar) {
  return {{"deviation", deviation},
          {"bar", bar},
          {"margin", bar > 0 ? nlohmann::json(deviation / bar) : nlohmann::json(nullptr)}};
}
}  // namespace

void Findings::held(const std::string& promise, const std::string& evidence, double deviation, double bar) {
  entries_.push_back({promise, "held", evidence, measure(deviation, bar)});
}

void Findings::broken(const std::string& promise, const std::string& evidence, double deviation, double bar) {
  entries_.push_back({promise, "broken", evidence, measure(deviation, bar)});
}

void Findings::recorded(const std::string& promise, const std::string& evidence) {
  entries_.push_back({promise, "recorded", evidence});
}

bool Findings::broken_if_any(const std::string& promise, const std::vector<std::string>& items, size_t shown) {
  if (items.empty()) return false;
  broken(promise, fmt::first_items(items, shown));
  return true;
}

bool Findings::any_broken() const {
  for (const Entry& e : entries_) {
    if (e.status == "broken") return true;
  }
  return false;
}

CheckResult Findings::result(const std::string& head) const {
  nlohmann::json metrics = metrics_;
  nlohmann::json promises = nlohmann::json::array();
  for (const Entry& e : entries_) {
    nlohmann::json p = {{"id", e.promise}, {"status", e.status}, {"evidence", e.evidence}};
    if (!e.measure.is_null()) p.update(e.measure);
    promises.push_back(std::move(p));
  }
  metrics["promises"] = promises;
  std::string ev = head;
  auto line = [&ev](const char* prefix, const std::string& text) {
    if (!ev.empty()) ev += '\n';
    ev += prefix;
    ev += text;
  };
  const bool failed = any_broken();
  // Failing: each broken promise first ("- "), then the others ("  held: ", "  recorded: ").
  // Passing: one line per promise.
  for (const Entry& e : entries_) {
    if (e.status == "broken") line("- ", e.evidence);
  }
  for (const Entry& e : entries_) {
    if (e.status == "broken") continue;
    line(!failed ? "" : e.status == "held" ? "  held: " : "  recorded: ", e.evidence);
  }
  return failed ? CheckResult::fail(ev, metrics) : CheckResult::pass(ev, metrics);
}

std::string second_epoch_out_of_reach(int64_t steps_per_epoch) {
  if (steps_per_epoch <= kMostStepsToSecondEpoch) return "";
  return "the first epoch is " + std::to_string(steps_per_epoch) + " steps (at most " +
         std::to_string(kMostStepsToSecondEpoch) + " are run to reach the second)";
}

}  // namespace tc
