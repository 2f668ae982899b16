#include "harness/contract/registry.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

namespace tc {

Registry& Registry::global() {
  static Registry registry;
  return registry;
}

void Registry::add_check(CheckInfo info) {
  if (info.name.empty()) throw std::invalid_argument("a check needs a name");
  if (!info.fn) throw std::invalid_argument("check '" + info.name + "' has no function");
  if (const CheckInfo* other = find_check(info.name)) {
    throw std::invalid_argument("check '" + info.name + "' registered twice: " + other->file + ":" +
                                std::to_string(other->line) + " and " + info.file + ":" +
                                std::to_string(info.line));
  }
  checks_.push_back(std::move(info));
}

void Registry::add_recipe(RecipeInfo info) {
  if (info.name.empty()) throw std::invalid_argument("a recipe needs a name");
  if (!info.make) throw std::invalid_argument("recipe '" + info.name + "' has no factory");
  if (const RecipeInfo* other = find_recipe(info.name)) {
    throw std::invalid_argument("recipe '" + info.name + "' registered twice: " + other->file +
                                ":" + std::to_string(other->line) + " and " + info.file + ":" +
                                std::to_string(info.line));
  }
  recipes_.push_back(std::move(info));
}

void Registry::add_recipe_source(RecipeSource source) {
  if (!source) throw std::invalid_argument("an empty recipe source");
  sources_.push_back(std::move(source));
}

std::vector<std::string> Registry::materialize(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const std::string& name : names) {
    std::vector<RecipeInfo> made;
    if (find_recipe(name) == nullptr) {
      for (const RecipeSource& source : sources_) {
        made = source(name);
        if (!made.empty()) break;
      }
    }
    if (made.empty()) {
      out.push_back(name);
      continue;
    }
    for (RecipeInfo& r : made) {
      out.push_back(r.name);
      if (find_recipe(r.name) == nullptr) add_recipe(std::move(r));
    }
  }
  return out;
}

CheckInfo* Registry::find_check(const std::string& name) {
  return const_cast<CheckInfo*>(static_cast<const Registry&>(*this).find_check(name));
}

RecipeInfo* Registry::find_recipe(const std::string& name) {
  return const_cast<RecipeInfo*>(static_cast<const Registry&>(*this).find_recipe(name));
}

const CheckInfo* Registry::find_check(const std::string& name) const {
  auto it = std::find_if(checks_.begin(), checks_.end(),
                         [&](const CheckInfo& c) { return c.name == name; });
  return it == checks_.end() ? nullptr : &*it;
}

const RecipeInfo* Registry::find_recipe(const std::string& name) const {
  auto it = std::find_if(recipes_.begin(), recipes_.end(),
                         [&](const RecipeInfo& r) { return r.name == name; });
  return it == recipes_.end() ? nullptr : &*it;
}

Expected Registry::expected(const std::string& check, const std::string& recipe) const {
  const RecipeInfo* r = find_recipe(recipe);
  if (r == nullptr) throw std::invalid_argument("unknown recipe '" + recipe + "'");
  if (!r->is_variant()) return Expected::kPass;
  return r->targets_check(check) ? Expected::kFail : Expected::kAny;
}

std::vector<std::string> Registry::validate() const {
  std::vector<std::string> problems;
  for (const RecipeInfo& r : recipes_) {
    for (const std::string& t : r.targets) {
      const CheckInfo* c = find_check(t);
      if (c == nullptr) {
        problems.push_back("recipe '" + r.name + "' (" + r.file + ":" + std::to_string(r.line) +
                           ") targets unknown check '" + t + "'");
      } else if (!c->judges_language(r.language_name())) {
        problems.push_back("recipe '" + r.name + "' (" + r.file + ":" + std::to_string(r.line) +
                           ") targets check '" + t + "', which judges no " + r.language_name() + " recipe (" +
                           c->languages_why + ")");
      } else if (!c->covers_variants) {
        // It would never be run on it: the variant would be targeted and never caught.
        problems.push_back("recipe '" + r.name + "' (" + r.file + ":" + std::to_string(r.line) +
                           ") targets check '" + t + "', which plans no variant cells (" +
                           (c->unsupported.empty() ? "CorrectRecipesOnly" : "unsupported") + ")");
      }
    }
  }
  for (const RecipeInfo& r : recipes_) {
    const std::string where = "recipe '" + r.name + "' (" + r.file + ":" + std::to_string(r.line) + ")";
    for (const auto& [check, promises] : r.breaks) {
      if (!r.targets_check(check)) {
        problems.push_back(where + " declares promises it breaks in check '" + check + "', which it does not target");
        continue;
      }
      const CheckInfo* c = find_check(check);
      if (c == nullptr) continue;  // named above
      if (promises.empty()) problems.push_back(where + " declares an empty list of promises it breaks in '" + check + "'");
      for (const std::string& id : promises) {
        const bool known = std::any_of(c->promises.begin(), c->promises.end(),
                                       [&](const PromiseInfo& p) { return p.id == id; });
        if (!known) {
          problems.push_back(where + " breaks promise '" + id + "', which check '" + check + "' does not register");
        }
      }
    }
  }
  for (const CheckInfo& c : checks_) {
    for (const auto& pin : c.not_judged_pins) {
      const std::string& id = pin.first;  // a plain reference: a lambda may not capture a binding in C++17
      const auto p = std::find_if(c.promises.begin(), c.promises.end(), [&](const PromiseInfo& q) { return q.id == id; });
      if (p == c.promises.end() || p->timing) {
        problems.push_back("check '" + c.name + "' (" + c.file + ":" + std::to_string(c.line) + ") pins NotJudged('" +
                           id + "'), " + (p == c.promises.end() ? "a promise it does not register before the pin"
                                                                 : "a timing promise, which is not pinned"));
      }
    }
    for (const ThrownDetection& d : c.detects_by_throwing) {
      const bool known = std::any_of(c.promises.begin(), c.promises.end(),
                                     [&](const PromiseInfo& p) { return p.id == d.promise; });
      if (!known) {
        problems.push_back("check '" + c.name + "' (" + c.file + ":" + std::to_string(c.line) +
                           ") detects by throwing for promise '" + d.promise + "', which it does not register");
      }
      if (d.message_contains.empty()) {
        problems.push_back("check '" + c.name + "' (" + c.file + ":" + std::to_string(c.line) +
                           ") detects by throwing with an empty message: every error would be a catch");
      }
    }
  }
  return problems;
}

CheckInfo& CheckBuilder::info() { return *registry_->find_check(name_); }

CheckBuilder* CheckBuilder::Promise(const std::string& id, const std::string& text) {
  info().promises.push_back({id, text});
  return this;
}
CheckBuilder* CheckBuilder::TimingPromise(const std::string& id, const std::string& text) {
  info().promises.push_back({id, text, true});
  return this;
}
CheckBuilder* CheckBuilder::NotJudged(const std::string& id, int cells) {
  info().not_judged_pins.emplace_back(id, cells);  // an unknown id: validate() names it
  for (PromiseInfo& p : info().promises) {
    if (p.id == id) p.not_judged_cells = cells;
  }
  return this;
}
CheckBuilder* CheckBuilder::MultiProcess(int ranks) {
  info().ranks = ranks;
  return this;
}
CheckBuilder* CheckBuilder::RunsAlone() {
  info().runs_alone = true;
  return this;
}
CheckBuilder* CheckBuilder::Timeout(int seconds) {
  info().timeout_s = seconds;
  return this;
}
CheckBuilder* CheckBuilder::NoSanityPrecondition() {
  info().sanity_precondition = false;
  return this;
}

CheckBuilder* CheckBuilder::Languages(const std::vector<std::string>& languages, const std::string& why) {
  for (const std::string& l : languages) {
    if (l != "c++" && l != "python") {
      throw std::invalid_argument("check '" + name_ + "': unknown language '" + l + "' (c++, python)");
    }
  }
  info().languages = languages;
  info().languages_why = why;
  return this;
}

CheckBuilder* CheckBuilder::CorrectRecipesOnly() {
  info().covers_variants = false;
  return this;
}

CheckBuilder* CheckBuilder::Preflight(std::function<void(const CheckContext&)> fn) {
  info().preflight = std::move(fn);
  return this;
}

CheckBuilder* CheckBuilder::DetectsByThrowing(const std::string& promise, const std::string& message_contains) {
  info().detects_by_throwing.push_back({promise, message_contains});
  return this;
}

RecipeInfo& RecipeBuilder::info() { return *registry_->find_recipe(name_); }

RecipeBuilder* RecipeBuilder::MustBeCaughtBy(const std::vector<std::string>& checks) {
  info().targets = checks;
  return this;
}
RecipeBuilder* RecipeBuilder::Breaks(const std::string& check, const std::vector<std::string>& promises) {
  std::vector<std::string>& b = info().breaks[check];
  b.insert(b.end(), promises.begin(), promises.end());
  return this;
}
RecipeBuilder* RecipeBuilder::Needs(const std::string& what) {
  info().needs = what;
  return this;
}
RecipeBuilder* RecipeBuilder::Control() {
  info().control = true;
  return this;
}

namespace detail {

[[noreturn]] void registration_failed(const std::exception& e) {
  std::fprintf(stderr, "torchconform: %s\n", e.what());
  std::abort();
}

// The builders the registration macros chain on: kept for the program's life (a static
// registration's builder was a bare `new`, which LeakSanitizer reports at exit).
template <class B>
B* keep(std::unique_ptr<B> b) {
  static std::vector<std::unique_ptr<B>>* kept = new std::vector<std::unique_ptr<B>>();  // never destroyed: no order issue
  kept->push_back(std::move(b));
  return kept->back().get();
}

CheckBuilder* register_check(CheckInfo info) {
  try {
    std::string name = info.name;
    Registry::global().add_check(std::move(info));
    return keep(std::unique_ptr<CheckBuilder>(new CheckBuilder(Registry::global(), name)));
  } catch (const std::exception& e) {
    registration_failed(e);
  }
}

RecipeBuilder* register_recipe(RecipeInfo info) {
  try {
    std::string name = info.name;
    Registry::global().add_recipe(std::move(info));
    return keep(std::unique_ptr<RecipeBuilder>(new RecipeBuilder(Registry::global(), name)));
  } catch (const std::exception& e) {
    registration_failed(e);
  }
}

}  // namespace detail
}  // namespace tc
