// Gradient hooks on a recipe's parameters, removed together (and on destruction, so a step that
// throws leaves none behind). A parameter that does not require a gradient (frozen, as in
// fine-tuning) gets no hook: autograd never computes its gradient, and LibTorch refuses the hook.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace tc {

class HookSet {
 public:
  HookSet() = default;
  HookSet(const HookSet&) = delete;
  HookSet& operator=(const HookSet&) = delete;
  ~HookSet() { remove_all(); }

  // Returns whether `p` took the hook (false: it does not require a gradient).
  bool add(const at::Tensor& p, std::function<void(const at::Tensor&)> hook) {
    if (!p.defined() || !p.requires_grad()) return false;
    hooks_.emplace_back(p, p.register_hook(std::move(hook)));
    return true;
  }
  // A hook whose result replaces the gradient autograd goes on with.
  bool add_replacing(const at::Tensor& p, std::function<at::Tensor(const at::Tensor&)> hook) {
    if (!p.defined() || !p.requires_grad()) return false;
    hooks_.emplace_back(p, p.register_hook(std::move(hook)));
    return true;
  }
  void remove_all() {
    for (auto& [p, id] : hooks_) p.remove_hook(id);
    hooks_.clear();
  }

 private:
  std::vector<std::pair<at::Tensor, unsigned>> hooks_;
};

}  // namespace tc
