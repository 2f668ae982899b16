#include "suites/amp/engagement.h"

#include "suites/amp/dtype.h"

#include <memory>
#include <sstream>
#include <stdexcept>
#include <vector>

#include <ATen/record_function.h>
#include <ATen/core/Tensor.h>

#include "harness/contract/registry.h"

namespace tc::amp {
namespace {

struct Frame {
  std::string name;
  bool matmul = false;
  bool backward_node = false;
  bool has_matmul_child = false;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  std::string shapes;
};

struct State {
  bool active = false;
  std::vector<Frame> stack;
  MatmulDtypes seen;
};

thread_local State state;

struct Ctx : at::ObserverContext {};

std::string shape(const at::Tensor& t) {
  std::ostringstream s;
  s << t.sizes();
  return s.str();
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  Frame f;
  f.name = fn.name();
  f.backward_node = fn.scope() == at::RecordScope::BACKWARD_FUNCTION;
  f.matmul = !f.backward_node && is_matmul_class(f.name);
  if (f.matmul) {
    int tensors = 0;
    for (const c10::IValue& v : fn.inputs()) {
      if (!v.isTensor()) continue;
      const at::Tensor& t = v.toTensor();
      if (!t.defined()) continue;
      if (f.dtype == c10::ScalarType::Undefined && t.is_floating_point()) f.dtype = t.scalar_type();
      if (tensors++ < 2) f.shapes += (f.shapes.empty() ? "" : " x ") + shape(t);
    }
    for (auto it = state.stack.rbegin(); it != state.stack.rend(); ++it) {
      if (it->matmul) {
        it->has_matmul_child = true;
        break;
      }
    }
  }
  state.stack.push_back(std::move(f));
  return std::make_unique<Ctx>();
}

void on_end(const at::RecordFunction&, at::ObserverContext*) {
  if (state.stack.empty()) return;
  Frame f = std::move(state.stack.back());
  state.stack.pop_back();
  if (!f.matmul || f.has_matmul_child || f.dtype == c10::ScalarType::Undefined) return;
  // Named by the outermost matmul-class op above it (what the model called) and its shapes, and
  // the autograd node for backward work.
  std::string label = f.name + " " + f.shapes;
  std::string node;
  for (const Frame& up : state.stack) {
    if (up.backward_node && node.empty()) node = up.name;
    if (up.matmul) {
      label = up.name + " " + up.shapes;
      break;
    }
  }
  if (!node.empty()) label = node + " > " + label;
  ++state.seen.by_op[label][f.dtype];
  ++state.seen.total;
}

}  // namespace

bool is_matmul_class(const std::string& op) {
  static const char* const kNames[] = {"aten::linear", "aten::matmul", "aten::mm", "aten::addmm",
                                       "aten::_addmm_activation", "aten::bmm", "aten::baddbmm", "aten::addbmm",
                                       "aten::scaled_dot_product_attention", "aten::prelu"};
  for (const char* n : kNames) {
    if (op == n) return true;
  }
  return op.rfind("aten::conv", 0) == 0 || op.rfind("aten::_conv", 0) == 0 ||
         op.rfind("aten::mkldnn_conv", 0) == 0 || op.rfind("aten::cudnn_conv", 0) == 0 ||
         op.rfind("aten::_slow_conv", 0) == 0 || op.rfind("aten::slow_conv", 0) == 0 ||
         op.rfind("aten::_scaled_dot_product", 0) == 0 || op.rfind("aten::mkldnn_linear", 0) == 0;
}

MatmulDtypeObserver::MatmulDtypeObserver() {
  if (state.active) throw std::logic_error("MatmulDtypeObserver is not nestable");
  state = State{};
  state.active = true;
  handle_ = at::addThreadLocalCallback(
      at::RecordFunctionCallback(&on_start, &on_end)
          .needsInputs(true)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
}

MatmulDtypeObserver::~MatmulDtypeObserver() {
  at::removeCallback(handle_);
  state.active = false;
}

MatmulDtypes MatmulDtypeObserver::result() const { return state.seen; }

namespace {
}  // namespace

bool engagement(Run& run, c10::ScalarType dtype, const std::string& device, Findings& out) {
  MatmulDtypes seen;
  {
    MatmulDtypeObserver observer;
    run.train_step();
    seen = observer.result();
  }
  const std::string d = dtype_name(dtype);
  if (seen.total == 0) {
    throw HarnessError("engagement (" + d + "): no matmul-class op (conv, linear, matmul, attention) was observed during "
                       "a train step on the calling thread, so the dtype they ran in cannot be told");
  }
  nlohmann::json per_op = nlohmann::json::object();
  int64_t in_dtype = 0;
  std::vector<std::string> not_cast;
  for (const auto& [op, dtypes] : seen.by_op) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [t, n] : dtypes) {
      j[dtype_name(t)] = n;
      if (t == dtype) {
        in_dtype += n;
      } else {
        not_cast.push_back(op + " (" + std::to_string(n) + (n == 1 ? " call" : " calls") + " in " + dtype_name(t) + ")");
      }
    }
    per_op[op] = j;
  }
  out.metrics()["engagement_" + d] = {{"matmul_calls", seen.total}, {"in_requested_dtype", in_dtype}, {"per_op", per_op}};
  const std::string what = "engagement (" + d + " autocast asked on " + device + "): " + std::to_string(in_dtype) + " of " +
                           std::to_string(seen.total) + " matmul-class calls of a train step ran in " + d;
  if (not_cast.empty()) {
    out.held("engagement", what);
    return true;
  }
  std::string s = what + "; not cast: ";
  for (size_t i = 0; i < not_cast.size(); ++i) s += (i ? ", " : "") + not_cast[i];
  out.broken("engagement", s);
  return false;
}

}  // namespace tc::amp
