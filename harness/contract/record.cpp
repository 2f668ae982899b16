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
    if (c.verdict == Verdict::kSkipped || !c.metrics.is_object() || !c.metrics.contains("promises") ||
        !c.metrics["promises"].is_array()) {
      continue;
    }
    std::set<std::string> ids;  // a promise judged per dtype or device may be recorded twice in a cell
    for (const auto& p : c.metrics["promises"]) {
      if (p.is_object() && p.value("status", std::string()) == "recorded") ids.insert(p.value("id", std::string("?")));
    }
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
