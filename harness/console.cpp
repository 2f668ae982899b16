#include "harness/console.h"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <map>
#include <set>
#include <tuple>

namespace tc {

void print_cell_line(std::ostream& os, const Cell& c, size_t index, size_t total) {
  char head[64];
  std::snprintf(head, sizeof head, "[%3zu/%zu] %-11s", index + 1, total, to_string(c.verdict));
  os << head << c.check << " / " << c.recipe << " / " << c.device;
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

void print_summary(std::ostream& os, const std::vector<Cell>& cells) {
  std::vector<std::string> devices, checks, recipes;
  auto add = [](std::vector<std::string>& v, const std::string& s) {
    if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
  };
  std::map<std::tuple<std::string, std::string, std::string>, const Cell*> at;
  for (const Cell& c : cells) {
    add(devices, c.device);
    add(checks, c.check);
    add(recipes, c.recipe);
    at[{c.device, c.check, c.recipe}] = &c;
  }
  size_t width = 8;
  for (const auto& r : recipes) width = std::max(width, r.size() + 2);
  for (const std::string& d : devices) {
    os << "\n" << d << ":\n" << std::left << std::setw(static_cast<int>(width)) << "recipe";
    for (const auto& c : checks) os << std::setw(static_cast<int>(std::max<size_t>(c.size(), 11) + 2)) << c;
    os << '\n';
    for (const auto& r : recipes) {
      os << std::setw(static_cast<int>(width)) << r;
      for (const auto& c : checks) {
        auto it = at.find({d, c, r});
        std::string v = "-";
        if (it != at.end()) {
          v = to_string(it->second->verdict);
          if (it->second->expected == Expected::kFail) v += "*";
          if (it->second->expected == Expected::kAny) v = "(" + v + ")";
        }
        os << std::setw(static_cast<int>(std::max<size_t>(c.size(), 11) + 2)) << v;
      }
      os << '\n';
    }
  }
  os << std::right << "\n* a broken variant the check must catch; (..) recorded, not judged\n";
  Summary s = summarize(cells);
  os << "summary:";
  for (const auto& [verdict, count] : s.counts) os << ' ' << verdict << '=' << count;
  os << " total=" << s.total << '\n';
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
