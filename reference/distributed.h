// Distributed helpers over c10d: the process group from torchrun's environment (Gloo on CPU, NCCL
// on CUDA, timeouts settable), gradient averaging with c10d's own DDP Reducer, and a message that
// names the ranks lost when a collective fails.
//
// No c10d, Gloo or NCCL header leaks from here: the engine stays in distributed.cpp, so including
// this costs what <ATen/core/Tensor.h> costs. Launch with torchrun and --no-python:
//
//   torchrun --standalone --nproc-per-node=2 --no-python ./my_trainer
//
//   auto env = tc::ref::dist::LaunchEnv::from_environment();          // nullopt: not under torchrun
//   auto pg = tc::ref::dist::ProcessGroup::create(*env, {tc::ref::dist::Backend::kGloo,
//                                                        std::chrono::seconds(30)});
//   tc::ref::dist::GradientReducer reducer(*pg, params);              // c10d::Reducer (DDP's engine)
//   ... loss = model(x) ...; reducer.prepare_for_backward(loss); loss.backward();  // grads averaged
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace tc::ref::dist {

// What torchrun tells each worker (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT, TORCHELASTIC_*).
struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  bool use_agent_store = false;  // torchrun's agent hosts the TCPStore (else rank 0 does)
  int restart_count = 0;         // TORCHELASTIC_RESTART_COUNT: attempts before this one
  int max_restarts = 0;
  std::string run_id;

  // From the environment; nullopt when RANK or WORLD_SIZE is unset. Throws std::invalid_argument
  // naming the variable when one is set but malformed, or MASTER_ADDR/PORT are missing.
  static std::optional<LaunchEnv> from_environment();
  std::string describe() const;  // "rank 1/2 (local 1/2) via 127.0.0.1:29500, attempt 0"
};

enum class Backend { kGloo, kNccl };
const char* backend_name(Backend b);

struct GroupOptions {
  Backend backend = Backend::kGloo;
  // Store connection and every collective: a peer that is gone fails the call after this long.
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
};

// A collective failed: says which ranks are gone, when that could be found out.
class PeerLost : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What the store tells of the other ranks after a failed collective.
struct LostRanks {
  bool store_answered = false;
  bool heartbeats = false;    // the ranks' beats were read (else a missing check-in alone decided)
  std::vector<int> lost;      // not checked in, heartbeat stood still: killed or stopped
  std::vector<int> waiting;   // not checked in, heartbeat moving: alive, still in its collective
};

class ProcessGroup {
 public:
  // Connects to torchrun's store (the agent's, or rank 0's), prefixed per restart attempt as
  // torch.distributed's env:// does, and builds the backend. NCCL uses cuda:LOCAL_RANK. Throws
  // std::runtime_error with the reason (no CUDA, NCCL not compiled in, store unreachable).
  static std::shared_ptr<ProcessGroup> create(const LaunchEnv& env, const GroupOptions& options);
  ~ProcessGroup();

  int rank() const;
  int size() const;
  Backend backend() const;
  const LaunchEnv& env() const;
  std::chrono::milliseconds timeout() const;

  // Collectives, waited for. A failure (peer gone, timeout) throws PeerLost whose message names
  // the lost ranks as far as the store can tell (see lost_ranks()).
  void allreduce_sum(std::vector<at::Tensor>& tensors);
  void broadcast(std::vector<at::Tensor>& tensors, int root);
  void barrier();
  // Every rank's tensor of the same shape, in rank order.
  std::vector<at::Tensor> all_gather(const at::Tensor& tensor);

  // Key-value store shared by the group (prefixed): for small observations.
  void store_set(const std::string& key, const std::string& value);
  std::string store_get(const std::string& key);  // waits up to the timeout

  // After a failed collective: every surviving rank checks in on the store; of the ranks that do
  // not within `grace`, those whose heartbeat (a thread of each rank adding to the store every
  // 200 ms) stood still over that time are lost, the others are alive and still waiting.
  LostRanks find_lost_ranks(std::chrono::milliseconds grace);
  // find_lost_ranks(grace).lost: empty when the store itself is unreachable.
  std::vector<int> lost_ranks(std::chrono::milliseconds grace);
  // Throws PeerLost for `what` (e.g. "backward", whose all-reduce the Reducer ran) that failed
  // with `e`, naming the lost ranks.
  [[noreturn]] void raise_lost(const std::string& what, const std::exception& e);

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  explicit ProcessGroup(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Averages gradients across the group during backward, bucketed and overlapped: c10d::Reducer,
// the engine under torch.nn.parallel.DistributedDataParallel, driven from C++. Parameters are
// broadcast from rank 0 when it is made (DDP's sync of module states).
class GradientReducer {
 public:
  GradientReducer(ProcessGroup& group, std::vector<at::Tensor> parameters,
                  int64_t bucket_bytes = int64_t{25} << 20);
  ~GradientReducer();
  // Before backward of each forward, with the outputs the loss comes from (DDP's forward hook).
  void prepare_for_backward(const std::vector<at::Tensor>& outputs);
  size_t buckets() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tc::ref::dist
