// compare: what differs between the two reports' environments (docs/benchmarks-and-gating.md).
#include "harness/compare.h"

#include <map>
#include <set>
#include <sstream>

namespace tc {

using nlohmann::json;

// --- environment ------------------------------------------------------------------------------

namespace {

std::string render_scalar(const json& j) {
  if (j.is_null()) return "n/a";
  if (j.is_string()) return j.get<std::string>();
  return j.dump();
}

bool all_strings(const json& a) {
  return a.is_array() && std::all_of(a.begin(), a.end(), [](const json& e) { return e.is_string(); });
}

void flatten(const json& j, const std::string& prefix, std::map<std::string, json>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
    }
  } else if (j.is_array() && !all_strings(j)) {
    for (size_t i = 0; i < j.size(); ++i) flatten(j[i], prefix + "[" + std::to_string(i) + "]", out);
    if (j.empty()) out[prefix] = j;
  } else {
    out[prefix] = j;
  }
}

// Lists of strings (CPU flags, argv) are compared as sets: "+added -removed".
std::string set_diff(const json& base, const json& next) {
  std::set<std::string> a, b;
  if (all_strings(base)) for (const json& e : base) a.insert(e.get<std::string>());
  if (all_strings(next)) for (const json& e : next) b.insert(e.get<std::string>());
  std::ostringstream s;
  for (const auto& x : b) if (!a.count(x)) s << (s.tellp() ? " " : "") << '+' << x;
  for (const auto& x : a) if (!b.count(x)) s << (s.tellp() ? " " : "") << '-' << x;
  return s.str();
}

}  // namespace

std::vector<EnvChange> diff_environment(const json& base, const json& next) {
  std::map<std::string, json> a, b;
  flatten(base, "", a);
  flatten(next, "", b);
  std::set<std::string> keys;
  for (const auto& [k, v] : a) keys.insert(k);
  for (const auto& [k, v] : b) keys.insert(k);
  std::vector<EnvChange> out;
  for (const std::string& k : keys) {
    const json va = a.count(k) ? a[k] : json(nullptr);
    const json vb = b.count(k) ? b[k] : json(nullptr);
    if (va == vb) continue;
    if (all_strings(va) && all_strings(vb)) {
      std::string d = set_diff(va, vb);
      if (d.empty()) continue;  // same set, another order
      out.push_back({k, std::to_string(va.size()) + " entries", std::to_string(vb.size()) + " entries: " + d});
    } else {
      out.push_back({k, all_strings(va) ? va.dump() : render_scalar(va),
                     all_strings(vb) ? vb.dump() : render_scalar(vb)});
    }
  }
  return out;
}

}  // namespace tc
