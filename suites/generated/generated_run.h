// Recipes nobody wrote (issue 44): a generator of correct recipes on the slots of ReferenceRun, each
// drawn by a seed from the product of the dimensions a real training loop varies, and mutation
// operators, each a real mistake with a named mechanism, that apply to any draw. The draws and
// their mutants are recipes named by pattern ("gen-17", "gen-17-drop_zero_grad"), made when a
// command names them (Registry::materialize): `run --recipe gen-17` replays a draw in any process.
// docs/generated.md lists the dimensions and operators.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/contract/registry.h"

namespace tc::generated {

// The dimensions: every combination of their choices is a correct recipe by construction.
enum Dim {
  kOptimizer,     // sgd, sgd_nesterov, adam, adamw, rmsprop
  kSchedule,      // step_lr (per update), constant, warmup_cosine, step_lr_per_epoch
  kBatching,      // 16 drop_last, 20 with an uneven last batch, 8 drop_last
  kAccumulation,  // 1, 2 or 3 micro-batches per step, each weighed by its share
  kModel,         // the reference's classifier (BatchNorm, dropout), the same with BatchNorm frozen, an MLP
  kFreezing,      // none, the first layer frozen (requires_grad off, still in the optimizer)
  kEma,           // none, an EMA evaluated in place of the weights, an EMA kept (checkpointed, not read)
  kCheckpoint,    // the reference's archive, one state-dict entry, flat keys at the top level
  kLoss,          // cross-entropy, cross-entropy with label smoothing 0.1
  kDecay,         // weight decay on every parameter, none on 1-D parameters (biases, norms) by name
  kAugmentation,  // on the loader's workers (seeded per batch), a flip on the training thread, none
  kDims
};

struct Dimension {
  const char* name;
  std::vector<const char*> choices;
};
const std::array<Dimension, kDims>& dimensions();

struct Draw {
  uint64_t seed = 0;
  std::array<int, kDims> pick{};
  const char* choice(Dim d) const { return dimensions()[d].choices[static_cast<size_t>(pick[d])]; }
  bool is(Dim d, const std::string& c) const { return c == choice(d); }
  // "optimizer=adam schedule=constant ..."
  std::string describe() const;
};
// The draw a seed names: each dimension's choice from a splitmix64 sequence of the seed.
Draw draw(uint64_t seed);

// A mistake applied to a draw: its mechanism, and the one promise of one check it breaks.
struct Operator {
  const char* name;
  const char* mechanism;
  const char* check;
  std::vector<std::string> promises;  // the cell is caught when one of these breaks
  // Empty where the mutant differs from the draw; otherwise why it is equivalent by construction
  // on this draw (the mistake changes nothing that any run can observe), and it is left out.
  std::string (*equivalent_on)(const Draw&);
};
const std::vector<Operator>& operators();
const Operator* find_operator(const std::string& name);
// The operators that make a mutant of `d` (not equivalent there).
std::vector<const Operator*> applicable(const Draw& d);

// The recipes a name gives: "gen-17", the draw; "gen-17-drop_zero_grad", one mutant of it (an
// equivalent one throws, naming why); "gen-1..20", the draws 1 to 20; "gen-1..20-*", every mutant of
// them that is not equivalent; "gen-1..20-@step_hygiene", those step_hygiene must catch. Empty for a
// name not of this form; an unknown operator or a bad range throws std::invalid_argument.
std::vector<RecipeInfo> recipes_named(const std::string& name);
std::string name_of(uint64_t seed, const Operator* op = nullptr);

// The registration of a draw (a control: a failing cell is a false alarm) or of one mutant (a
// variant that must be caught by its operator's check, by one of its promises).
RecipeInfo recipe_info(uint64_t seed, const Operator* op = nullptr);

}  // namespace tc::generated
