// What a recipe can tell of the checks before any runs: which will judge it, which will skip it and
// why, in the recipe's own terms (`torchconform list --python FILE`). A Python recipe answers from
// its class (what it overrides and declares; python/torchconform/_outlook.py); a C++ recipe has no
// outlook. The run decides: an outlook is a forecast, and "if" names what only running shows.
#pragma once

#include <string>
#include <vector>

namespace tc {

struct CheckOutlook {
  std::string check;
  std::string judged;  // "yes", "no" (skipped: `why`) or "if" (judged if `why` holds when it runs)
  std::string why;
};

class RecipeOutlook {
 public:
  virtual ~RecipeOutlook() = default;
  // One entry per check of `checks`, in that order, for cells on `device` ("cpu", "cuda").
  virtual std::vector<CheckOutlook> outlook(const std::vector<std::string>& checks, const std::string& device) const = 0;
};

}  // namespace tc
