// Learning-rate schedules a checkpoint can keep: the reference recipe's schedule slot
// (ReferenceRun::make_schedule) returns one. LibTorch's schedulers have no state to save; these do.
//
//   Schedule              the slot's interface: step() after each optimisation step, save/load
//   Resumable<S>          any torch::optim::LRScheduler S (StepLR, ReduceLROnPlateau's kin, your
//                         own) made resumable: its step count goes into the checkpoint
//   WarmupCosine          linear warm-up, then cosine decay to a floor (set from the step count)
//   ConstantLR            the learning rate the optimizer was made with, every step (a count kept)
//   PerEpoch<S>           any Schedule S stepped once an epoch instead of once an update
//
// A schedule that sets the learning rate from its step count (WarmupCosine) resumes exactly from
// the count alone. One that multiplies the current rate (StepLR) resumes because the optimizer's
// checkpoint keeps the rates of its param groups: load the optimizer before the schedule, as
// ReferenceRun::checkpoint_parts() does.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <torch/optim/optimizer.h>
#include <torch/optim/schedulers/lr_scheduler.h>
#include <torch/optim/schedulers/step_lr.h>

namespace torch::serialize {
class OutputArchive;
class InputArchive;
}  // namespace torch::serialize

namespace tc::ref {

class Schedule {
 public:
  virtual ~Schedule() = default;
  // After each optimisation step: the next step's learning rates.
  virtual void step() = 0;
  virtual void save(torch::serialize::OutputArchive& archive) const = 0;
  virtual void load(torch::serialize::InputArchive& archive) = 0;
};

// Writes / reads the "step_count" entry (the format ReferenceRun used since 0.1).
void save_step_count(torch::serialize::OutputArchive& archive, int64_t count);
int64_t load_step_count(torch::serialize::InputArchive& archive);

template <typename S>
class Resumable : public S, public Schedule {
 public:
  using S::S;
  void step() override { S::step(); }
  int64_t step_count() const { return static_cast<int64_t>(this->step_count_); }
  void set_step_count(int64_t n) { this->step_count_ = static_cast<unsigned>(n); }
  void save(torch::serialize::OutputArchive& archive) const override { save_step_count(archive, step_count()); }
  void load(torch::serialize::InputArchive& archive) override { set_step_count(load_step_count(archive)); }
};

// The name 0.2 had for it. Kept for one release.
using ResumableStepLR [[deprecated("tc::ref::ResumableStepLR is tc::ref::Resumable<torch::optim::StepLR> since "
                                   "torchconform 0.3 (reference/schedule.h); the old name goes in 0.4")]] =
    Resumable<torch::optim::StepLR>;

// lr(t) = base * (t + 1) / warmup for t < warmup, then
// base * (floor + (1 - floor) * (1 + cos(pi * (t - warmup) / (total - warmup))) / 2), held at
// base * floor from `total` on; t is the optimisation step about to run. Every param group keeps
// its own base (its learning rate when the schedule was made).
class WarmupCosine : public Schedule {
 public:
  WarmupCosine(torch::optim::Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps,
               double floor_ratio = 0.0);
  void step() override;
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;
  int64_t step_count() const { return count_; }
  double factor(int64_t t) const;

 private:
  void apply();
  torch::optim::Optimizer& optimizer_;
  std::vector<double> base_;
  int64_t warmup_, total_;
  double floor_;
  int64_t count_ = 0;
};

// The learning rate the optimizer was made with, every step: what a loop without a schedule does.
// Its step count is kept (and saved) so that a checkpoint records how far training went.
class ConstantLR : public Schedule {
 public:
  void step() override { ++count_; }
  void save(torch::serialize::OutputArchive& archive) const override { save_step_count(archive, count_); }
  void load(torch::serialize::InputArchive& archive) override { count_ = load_step_count(archive); }
  int64_t step_count() const { return count_; }

 private:
  int64_t count_ = 0;
};

// PerEpoch's "updates" entry.
void save_updates(torch::serialize::OutputArchive& archive, int64_t updates);
int64_t load_updates(torch::serialize::InputArchive& archive);

// Any Schedule stepped once an epoch: step() is called after every update (ReferenceRun's loop) and
// steps the wrapped schedule when `updates_per_epoch` updates have passed. The updates counted go
// into the checkpoint beside the wrapped schedule's state, so a resume mid-epoch steps it at the
// same update. E.g. `std::make_unique<PerEpoch<Resumable<torch::optim::StepLR>>>(steps_per_epoch(),
// optimizer, 2, 0.5)`: the rate halves every 2 epochs. (steps_per_epoch() is known in
// make_schedule(): setup() makes the sampler first.)
template <typename S>
class PerEpoch : public Schedule {
 public:
  template <typename... Args>
  explicit PerEpoch(int64_t updates_per_epoch, Args&&... args)
      : per_epoch_(updates_per_epoch), inner_(std::forward<Args>(args)...) {}
  void step() override {
    if (++updates_ % per_epoch_ == 0) inner_.step();
  }
  void save(torch::serialize::OutputArchive& archive) const override {
    inner_.save(archive);
    save_updates(archive, updates_);
  }
  void load(torch::serialize::InputArchive& archive) override {
    inner_.load(archive);
    updates_ = load_updates(archive);
  }
  S& inner() { return inner_; }

 private:
  int64_t per_epoch_;
  S inner_;
  int64_t updates_ = 0;
};

}  // namespace tc::ref
