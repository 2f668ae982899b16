#include "harness/catalogue.h"

#include <sstream>

namespace tc {

using nlohmann::json;

json catalogue_json(const Registry& reg, int cuda_devices) {
  json j = {{"checks", json::array()}, {"recipes", json::array()}};
  for (const CheckInfo& c : reg.checks()) {
    json promises = json::array();
    for (const PromiseInfo& p : c.promises) {
      promises.push_back({{"id", p.id}, {"text", p.text}, {"timing", p.timing},
                          {"not_judged_cells", p.timing ? json(nullptr) : json(p.not_judged_cells)}});
    }
    json detects = json::array();
    for (const ThrownDetection& d : c.detects_by_throwing) {
      detects.push_back({{"promise", d.promise}, {"message_contains", d.message_contains}});
    }
    j["checks"].push_back({{"name", c.name},
                           {"promise", c.promise},
                           {"promises", promises},
                           {"covers_variants", c.covers_variants},
                           {"detects_by_throwing", detects},
                           {"multi_process", c.multi_process()},
                           {"ranks", c.ranks},
                           {"runs_alone", c.runs_alone},
                           {"timeout_s", c.timeout_s},
                           {"unsupported", c.unsupported.empty() ? json(nullptr) : json(c.unsupported)},
                           {"languages", c.languages.empty() ? json(nullptr) : json(c.languages)},
                           {"languages_why", c.languages.empty() ? json(nullptr) : json(c.languages_why)}});
  }
  for (const RecipeInfo& r : reg.recipes()) {
    j["recipes"].push_back({{"name", r.name},
                            {"description", r.description},
                            {"targets", r.targets},
                            {"breaks", r.breaks},
                            {"control", r.control},
                            {"role", to_string(r.role())},
                            {"needs", r.needs.empty() ? json(nullptr) : json(r.needs)},
                            {"language", r.language_name()}});
  }
  j["devices"] = {{"cpu", true}, {"cuda", cuda_devices > 0}};
  return j;
}

std::string render_catalogue_text(const Registry& reg, int cuda_devices) {
  std::ostringstream os;
  os << "checks:\n";
  for (const CheckInfo& c : reg.checks()) {
    os << "  " << c.name;
    if (c.multi_process()) os << "  (" << c.ranks << " processes under torchrun)";
    if (c.runs_alone) os << "  (runs alone: it measures time)";
    if (!c.unsupported.empty()) os << "  (not checkable from C++)";
    if (!c.languages.empty()) {
      os << "  (judges ";
      for (size_t i = 0; i < c.languages.size(); ++i) os << (i ? ", " : "") << (c.languages[i] == "c++" ? "C++" : "Python");
      os << " recipes only)";
    }
    os << "\n      " << c.promise << '\n';
  }
  os << "\nrecipes:\n";
  for (const RecipeInfo& r : reg.recipes()) {
    os << "  " << r.name;
    if (r.is_variant()) {
      os << "  (broken variant; must be caught by:";
      for (const auto& t : r.targets) {
        os << ' ' << t;
        if (const std::vector<std::string>* b = r.declared_breaks(t)) {
          os << " [breaks";
          for (size_t i = 0; i < b->size(); ++i) os << (i ? ", " : " ") << (*b)[i];
          os << ']';
        }
      }
      if (!r.needs.empty()) os << "; needs " << r.needs;
      os << ')';
    } else if (r.control) {
      os << "  (the suite's reference: a control, must pass)";
    } else {
      os << "  (a subject under test: its failing cells are findings)";
    }
    if (!r.language.empty()) os << "  [" << r.language << "]";
    os << "\n      " << r.description << '\n';
  }
  os << "\ndevices:\n  cpu   available\n  cuda  "
     << (cuda_devices > 0 ? std::to_string(cuda_devices) + " device(s)" : "not available") << '\n';
  return os.str();
}

}  // namespace tc
