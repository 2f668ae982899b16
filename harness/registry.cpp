#include "harness/registry.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

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
  bool targeted = std::find(r->targets.begin(), r->targets.end(), check) != r->targets.end();
  return targeted ? Expected::kFail : Expected::kAny;
}

std::vector<std::string> Registry::validate() const {
  std::vector<std::string> problems;
  for (const RecipeInfo& r : recipes_) {
    for (const std::string& t : r.targets) {
      if (find_check(t) == nullptr) {
        problems.push_back("recipe '" + r.name + "' (" + r.file + ":" + std::to_string(r.line) +
                           ") targets unknown check '" + t + "'");
      }
    }
  }
  return problems;
}

namespace detail {

// Registration runs before main: a mistake here is a programmer error, reported with its place.
CheckRegistrar::CheckRegistrar(CheckInfo info) {
  try {
    Registry::global().add_check(std::move(info));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "torchconform: %s\n", e.what());
    std::abort();
  }
}

RecipeRegistrar::RecipeRegistrar(RecipeInfo info) {
  try {
    Registry::global().add_recipe(std::move(info));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "torchconform: %s\n", e.what());
    std::abort();
  }
}

}  // namespace detail
}  // namespace tc
