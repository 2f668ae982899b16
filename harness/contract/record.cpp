#include "harness/contract/record.h"

#include <set>
#include <stdexcept>

namespace tc {
namespace {
constexpr Verdict kVerdicts[] = {Verdict::kOk,    Verdict::kMissed,  Verdict::kFalseAlarm,
                                 Verdict::kError, Verdict::kSkipped, Verdict::kFail};
}  // namespace

const char* to_string(Expected e) {
  switch (e) {
    case Expected::kPass: return "pass";
    case Expected::kFail: return "fail";
    case Expected::kAny: return "any";
  }
  return "?";
}

const char* to_string(Outcome o) {
  switch (o) {
    case Outcome::kPass: return "pass";
    case Outcome::kFail: return "fail";
    case Outcome::kNone: return "none";
  }
  return "?";
}

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::kOk: return "ok";
    case Verdict::kMissed: return "missed";
    case Verdict::kFalseAlarm: return "false_alarm";
    case Verdict::kError: return "error";
    case Verdict::kSkipped: return "skipped";
    case Verdict::kFail: return "fail";
  }
  return "?";
}

const char* to_string(Role r) {
  switch (r) {
    case Role::kReference: return "reference";
    case Role::kVariant: return "variant";
    case Role::kSubject: return "subject";
  }
  return "?";
}

Expected expected_from_string(const std::string& s) {
  if (s == "pass") return Expected::kPass;
  if (s == "fail") return Expected::kFail;
  if (s == "any") return Expected::kAny;
  throw std::invalid_argument("unknown expected value '" + s + "' (pass, fail, any)");
}

Outcome outcome_from_string(const std::string& s) {
  if (s == "pass") return Outcome::kPass;
  if (s == "fail") return Outcome::kFail;
  if (s == "none") return Outcome::kNone;
  throw std::invalid_argument("unknown outcome '" + s + "' (pass, fail, none)");
}

Verdict verdict_from_string(const std::string& s) {
  for (Verdict v : kVerdicts) {
    if (s == to_string(v)) return v;
  }
  throw std::invalid_argument("unknown verdict '" + s + "'");
}

Role role_from_string(const std::string& s) {
  for (Role r : {Role::kReference, Role::kVariant, Role::kSubject}) {
    if (s == to_string(r)) return r;
  }
  throw std::invalid_argument("unknown role '" + s + "' (reference, variant, subject)");
}

Verdict judge(Expected expected, Outcome outcome, Role role) {
  if (outcome == Outcome::kNone) return Verdict::kError;
  switch (expected) {
    case Expected::kAny: return Verdict::kOk;
    case Expected::kPass:
      if (outcome == Outcome::kPass) return Verdict::kOk;
      return role == Role::kSubject ? Verdict::kFail : Verdict::kFalseAlarm;
    case Expected::kFail: return outcome == Outcome::kFail ? Verdict::kOk : Verdict::kMissed;
  }
  return Verdict::kError;
}

namespace {

// The ids of a cell's promises with `status` (metrics.promises).
std::set<std::string> promise_ids(const Cell& c, const char* status) {
  std::set<std::string> ids;
  if (!c.metrics.is_object() || !c.metrics.contains("promises") || !c.metrics["promises"].is_array()) return ids;
  for (const auto& p : c.metrics["promises"]) {
    if (p.is_object() && p.value("status", std::string()) == status) ids.insert(p.value("id", std::string("?")));
  }
  return ids;
}

// A variant that was not caught and whose declared promises were all recorded, not judged.
bool declared_all_not_judged(const Cell& c) {
  if (c.verdict == Verdict::kOk || !c.metrics.is_object() || !c.metrics.contains("declared_breaks")) return false;
  const nlohmann::json& declared = c.metrics["declared_breaks"];
  if (!declared.is_array() || declared.empty()) return false;
  const std::set<std::string> recorded = promise_ids(c, "recorded");
  for (const auto& id : declared) {
    if (!id.is_string() || recorded.count(id.get<std::string>()) == 0) return false;
  }
  return true;
}

void count_teeth(const Cell& c, std::map<std::string, Summary::Teeth>& teeth) {
  const bool control = c.role == Role::kReference && c.expected == Expected::kPass;
  const bool variant = c.role == Role::kVariant && c.expected == Expected::kFail;
  if (!control && !variant) return;
  Summary::Teeth& t = teeth[c.check];
  if (c.verdict == Verdict::kSkipped) {
    ++t.skipped;
  } else if (c.verdict == Verdict::kError) {
    ++t.errors;
  } else if (control) {
    ++t.controls;
    if (c.verdict == Verdict::kFalseAlarm) ++t.false_alarms;
    if (!promise_ids(c, "recorded").empty()) ++t.controls_not_judged;
  } else if (declared_all_not_judged(c)) {
    ++t.variants_not_judged;
  } else {
    ++t.variants;
    ++(c.verdict == Verdict::kOk ? t.caught : t.missed);
  }
}

}  // namespace

Summary summarize(const std::vector<Cell>& cells) {
  Summary s;
  for (Verdict v : kVerdicts) s.counts[to_string(v)] = 0;
  for (const Cell& c : cells) {
    ++s.counts[to_string(c.verdict)];
    auto [it, fresh] = s.by_role.try_emplace(to_string(c.role));
    if (fresh) {
      for (Verdict v : kVerdicts) it->second[to_string(v)] = 0;
      it->second["total"] = 0;
    }
    ++it->second[to_string(c.verdict)];
    ++it->second["total"];
    count_teeth(c, s.teeth);
    if (c.verdict == Verdict::kSkipped || !c.metrics.is_object() || !c.metrics.contains("promises") ||
        !c.metrics["promises"].is_array()) {
      continue;
    }
    const std::set<std::string> ids = promise_ids(c, "recorded");  // a promise judged per dtype may be recorded twice
    for (const std::string& id : ids) ++s.not_judged[c.check][id];
    if (!ids.empty()) ++s.not_judged[c.check][""];
  }
  s.total = static_cast<int>(cells.size());
  return s;
}

int exit_code_for(const std::vector<Cell>& cells) {
  bool any_ran = false;
  for (const Cell& c : cells) {
    if (c.verdict != Verdict::kOk && c.verdict != Verdict::kSkipped) return 1;
    any_ran = any_ran || c.verdict == Verdict::kOk;
  }
  // Nothing was checked: not a pass (CTest reads it as SKIP_RETURN_CODE, JUnit as <skipped/>).
  return cells.empty() || any_ran ? 0 : 77;  // automake's "skipped"
}

}  // namespace tc
