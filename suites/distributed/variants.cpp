// Broken variants the distributed check must catch: the reference with one distributed practice
// broken, the way the seeds' "Fail:" code does it.
#include <torch/torch.h>

#include "harness/contract/registry.h"
#include "reference/distributed_run.h"

namespace tc::variants {

// Fail: the epoch loop never calls sampler.set_epoch(epoch): every epoch replays epoch 0's order.
class NoSetEpochDist : public ref::DistributedReference {
 protected:
  void begin_epoch(int64_t) override { sampler_->reset(); }
};

// Fail: `torch.save(...)` with no `if rank == 0`: every rank writes the same files.
class AllRanksWriteDist : public ref::DistributedReference {
 protected:
  bool writes_files() const override { return true; }
};

// Fail: rank 0 saves and the others go on (and read the checkpoint) without waiting for it.
class NoBarrierAfterSaveDist : public ref::DistributedReference {
 protected:
  void after_write() override {}
};

// Fail: the model is not wrapped for data parallelism: each rank steps on its own gradients.
class NoGradAllreduceDist : public ref::DistributedReference {
 protected:
  void attach_gradient_averaging() override {}
};

template <typename Dist>
class WithDistributed : public ref::ReferenceRecipe {
 public:
  std::unique_ptr<tc::DistributedRecipe> make_distributed() const override { return std::make_unique<Dist>(); }
};

using NoSetEpoch = WithDistributed<NoSetEpochDist>;
using AllRanksWrite = WithDistributed<AllRanksWriteDist>;
using NoBarrierAfterSave = WithDistributed<NoBarrierAfterSaveDist>;
using NoGradAllreduce = WithDistributed<NoGradAllreduceDist>;

}  // namespace tc::variants

TC_RECIPE(tc::variants::NoSetEpoch, "no_set_epoch",
          "never calls sampler.set_epoch: every epoch sees the same order")
    ->MustBeCaughtBy({"distributed"})
    ->Breaks("distributed", {"sampler"});
TC_RECIPE(tc::variants::AllRanksWrite, "all_ranks_write",
          "every rank writes the checkpoint and the report, not rank 0 alone")
    ->MustBeCaughtBy({"distributed"})
    ->Breaks("distributed", {"rank0_writes"});
TC_RECIPE(tc::variants::NoBarrierAfterSave, "no_barrier_after_save",
          "no barrier after rank 0 saves: other ranks read before the file is there")
    ->MustBeCaughtBy({"distributed"})
    ->Breaks("distributed", {"checkpoint_loads_unwrapped"});
TC_RECIPE(tc::variants::NoGradAllreduce, "no_grad_allreduce",
          "gradients never all-reduced: each rank steps on its own batch's gradients")
    ->MustBeCaughtBy({"distributed"})
    // Each rank trains alone; the checkpoint holds rank 0's replica, so rank 1 resumes from weights
    // that are not its own (resume_every_rank) and loads other weights than its own after save.
    ->Breaks("distributed", {"ddp_gradients", "replicas_identical", "checkpoint_loads_unwrapped", "resume_every_rank"});
