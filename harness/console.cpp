#include "harness/console.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "harness/util/text_format.h"

namespace tc {
namespace {

constexpr Verdict kAllVerdicts[] = {Verdict::kOk,    Verdict::kMissed,  Verdict::kFalseAlarm,
                                    Verdict::kFail,  Verdict::kError,   Verdict::kSkipped};

// The widest verdict name: the progress lines pad every verdict to it.
size_t verdict_width() {
  size_t w = 0;
  for (Verdict v : kAllVerdicts) w = std::max(w, std::string(to_string(v)).size());
  return w;
}

// A matrix cell's text: the verdict, "*" on a broken variant the check must catch, "(..)" where
// the cell is recorded, not judged.
std::string matrix_label(const Cell& c) {
  std::string v = to_string(c.verdict);
  if (c.expected == Expected::kFail) v += "*";
  if (c.expected == Expected::kAny) v = "(" + v + ")";
  return v;
}

std::string padded(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

const char* role_heading(const std::string& role) {
  if (role == "reference") return "the suite's reference";
  if (role == "variant") return "the suite's broken variants";
  return "your recipes (subjects under test)";
}

// Per check that ran a targeted variant or raised a false alarm: its mutation score and its
// false-alarm rate on this run's controls (Summary::teeth).
void print_teeth(std::ostream& os, const Summary& s) {
  size_t width = 0;
  for (const auto& [check, t] : s.teeth) {
    if (t.variants + t.variants_not_judged + t.false_alarms > 0) width = std::max(width, check.size());
  }
  if (width == 0) return;
  os << "  teeth per check (targeted variants caught / judged; controls failed / judged):\n";
  for (const auto& [check, t] : s.teeth) {
    if (t.variants + t.variants_not_judged + t.false_alarms == 0) continue;
    os << "    " << padded(check, width + 2) << t.caught << '/' << t.variants << " caught";
    if (t.variants > 0) os << " (score " << fmt::sig(t.mutation_score(), 3) << ')';
    if (t.variants_not_judged > 0) os << ", " << t.variants_not_judged << " not judged (out of the score)";
    os << "; " << t.false_alarms << '/' << t.controls << " false alarms\n";
  }
}

}  // namespace

void print_cell_line(std::ostream& os, const Cell& c, size_t index, size_t total) {
  char head[32];
  std::snprintf(head, sizeof head, "[%3zu/%zu] ", index + 1, total);
  os << head << padded(to_string(c.verdict), verdict_width() + 1) << c.check << " / " << c.recipe << " / "
     << c.device;
  char tail[32];
  std::snprintf(tail, sizeof tail, "  (%.1f s)", c.duration_s);
  os << tail;
  if (c.verdict != Verdict::kOk) {
    std::string first = c.evidence.substr(0, c.evidence.find('\n'));
    if (first.size() > 160) first = first.substr(0, 157) + "...";
    os << "\n          " << first;
  }
  os << '\n';
}

void print_summary(std::ostream& os, const std::vector<Cell>& cells, const std::vector<NotApplicable>& not_applicable) {
  std::vector<std::string> devices, checks, recipes;
  auto add = [](std::vector<std::string>& v, const std::string& s) {
    if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
  };
  std::map<std::tuple<std::string, std::string, std::string>, const Cell*> at;
  bool subjects = false;
  for (const Cell& c : cells) {
    add(devices, c.device);
    add(checks, c.check);
    add(recipes, c.recipe);
    at[{c.device, c.check, c.recipe}] = &c;
    subjects = subjects || c.role == Role::kSubject;
  }
  // Every column as wide as its widest entry, whatever the verdict names: the columns stay aligned.
  size_t recipe_width = std::string("recipe").size();
  for (const auto& r : recipes) recipe_width = std::max(recipe_width, r.size());
  std::map<std::string, size_t> width;
  for (const auto& k : checks) width[k] = k.size();
  for (const auto& [key, cell] : at) {
    width[std::get<1>(key)] = std::max(width[std::get<1>(key)], matrix_label(*cell).size());
  }
  for (const std::string& d : devices) {
    std::string line = padded("recipe", recipe_width + 2);
    for (const auto& k : checks) line += padded(k, width[k] + 2);
    os << "\n" << d << ":\n" << line << '\n';
    for (const auto& r : recipes) {
      line = padded(r, recipe_width + 2);
      for (const auto& k : checks) {
        auto it = at.find({d, k, r});
        line += padded(it == at.end() ? "-" : matrix_label(*it->second), width[k] + 2);
      }
      os << line << '\n';
    }
  }
  os << "\n* a broken variant the check must catch; (..) recorded, not judged";
  if (subjects) os << "; fail: your recipe breaks the check's practice";
  os << '\n';
  Summary s = summarize(cells);
  os << "summary:";
  for (const auto& [verdict, count] : s.counts) os << ' ' << verdict << '=' << count;
  os << " total=" << s.total << '\n';
  // Apart: the suite's own controls (they show the checks work) and the recipes under test.
  for (const char* role : {"subject", "reference", "variant"}) {
    auto it = s.by_role.find(role);
    if (it == s.by_role.end()) continue;
    os << "  " << role_heading(role) << ":";
    for (const auto& [verdict, count] : it->second) {
      if (count > 0 && verdict != "total") os << ' ' << verdict << '=' << count;
    }
    os << " total=" << it->second.at("total") << '\n';
  }
  // What ended without a verdict, per check: the exception, counted (cells with a promise recorded).
  if (!s.not_judged.empty()) {
    os << "  not judged (cells with a promise recorded, not judged):";
    for (const auto& [check, per] : s.not_judged) os << ' ' << check << '=' << per.at("");
    os << '\n';
  }
  print_teeth(os, s);
  // Not cells: checks that cannot apply to a recipe's language, counted per check.
  if (!not_applicable.empty()) {
    std::map<std::string, int> per_check;
    for (const NotApplicable& n : not_applicable) ++per_check[n.check];
    std::set<std::string> why;  // each reason's head ("the check judges Python recipes only")
    for (const NotApplicable& n : not_applicable) why.insert(n.reason.substr(0, n.reason.find(':')));
    os << "  not applicable (left out, not cells):";
    for (const auto& [check, n] : per_check) os << ' ' << check << '=' << n;
    std::string reasons;
    for (const std::string& w : why) reasons += (reasons.empty() ? "" : "; ") + w;
    os << " (" << reasons << "; the report lists each)\n";
  }
  print_error_owners(os, cells);
}

void print_error_owners(std::ostream& os, const std::vector<Cell>& cells) {
  // owner check -> (the text its detection matches, recipes whose cells threw it, how many cells)
  std::map<std::string, std::tuple<std::string, std::set<std::string>, int>> owners;
  for (const Cell& c : cells) {
    if (!c.metrics.is_object() || !c.metrics.contains("error_owned_by")) continue;
    const nlohmann::json& o = c.metrics["error_owned_by"];
    auto& [text, recipes, n] = owners[o.value("check", "")];
    text = o.value("message_contains", "");
    recipes.insert(c.recipe);
    ++n;
  }
  for (const auto& [check, entry] : owners) {
    const auto& [text, recipes, n] = entry;
    std::string names;
    for (const std::string& r : recipes) names += (names.empty() ? "" : ", ") + r;
    os << n << " cell" << (n == 1 ? "" : "s") << " of " << names << " threw the error " << check
       << " detects (\"" << text << "\"): training itself breaks that practice; " << check
       << "'s cell is the one to read\n";
  }
}

}  // namespace tc
