// c10d from C++: TCPStore, ProcessGroupGloo (libtorch_cpu), ProcessGroupNCCL (libtorch_cuda, in
// distributed_nccl.cpp) and the DDP Reducer. The wheel ships the c10d headers but not Gloo's;
// ProcessGroupGloo.hpp is compiled against Debian's libgloo-dev headers (another Gloo snapshot than
// the one inside libtorch_cpu), so Gloo types stay opaque here: only shared_ptrs to them are held,
// every Gloo call goes through libtorch_cpu.
#include "reference/distributed.h"

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <thread>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include "harness/util/text_format.h"

namespace tc::ref::dist {

// distributed_nccl.cpp: ProcessGroupNCCL where LibTorch has CUDA, else a clear error.
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size, int local_rank,
                                                    std::chrono::milliseconds timeout);

namespace {

std::optional<std::string> get_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

int env_int(const char* name, int fallback, bool required) {
  auto v = get_env(name);
  if (!v) {
    if (required) throw std::invalid_argument(std::string(name) + " is not set (launch with torchrun)");
    return fallback;
  }
  try {
    size_t used = 0;
    const int x = std::stoi(*v, &used);
    if (used != v->size()) throw std::invalid_argument("trailing text");
    return x;
  } catch (const std::exception&) {
    throw std::invalid_argument(std::string(name) + "='" + *v + "' is not an integer");
  }
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

using fmt::first_line;

}  // namespace

const char* backend_name(Backend b) { return b == Backend::kNccl ? "nccl" : "gloo"; }

std::optional<LaunchEnv> LaunchEnv::from_environment() {
  if (!get_env("RANK") || !get_env("WORLD_SIZE")) return std::nullopt;
  LaunchEnv e;
  e.rank = env_int("RANK", 0, true);
  e.world_size = env_int("WORLD_SIZE", 1, true);
  e.local_rank = env_int("LOCAL_RANK", e.rank, false);
  e.local_world_size = env_int("LOCAL_WORLD_SIZE", e.world_size, false);
  if (e.world_size < 1 || e.rank < 0 || e.rank >= e.world_size) {
    throw std::invalid_argument("RANK=" + std::to_string(e.rank) + " is not in [0, WORLD_SIZE=" +
                                std::to_string(e.world_size) + ")");
  }
  auto addr = get_env("MASTER_ADDR");
  if (!addr || addr->empty()) throw std::invalid_argument("MASTER_ADDR is not set (launch with torchrun)");
  e.master_addr = *addr;
  e.master_port = env_int("MASTER_PORT", 0, true);
  if (e.master_port <= 0 || e.master_port > 65535) {
    throw std::invalid_argument("MASTER_PORT=" + std::to_string(e.master_port) +
                                " is not a port (torchrun --master-port=0 passes 0 on: use --standalone "
                                "or --rdzv-backend=c10d)");
  }
  e.use_agent_store = get_env("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True";
  e.restart_count = env_int("TORCHELASTIC_RESTART_COUNT", 0, false);
  e.max_restarts = env_int("TORCHELASTIC_MAX_RESTARTS", 0, false);
  e.run_id = get_env("TORCHELASTIC_RUN_ID").value_or("");
  return e;
}

std::string LaunchEnv::describe() const {
  std::ostringstream s;
  s << "rank " << rank << "/" << world_size << " (local " << local_rank << "/" << local_world_size
    << ") via " << master_addr << ":" << master_port << ", attempt " << restart_count;
  return s.str();
}

namespace {

// Every rank beats on the store from a thread of its own, over a connection of its own (a store
// call waiting in the main thread holds its client's lock): a rank blocked in a collective still
// beats; a killed or stopped process does not. That, not whether a rank has yet noticed the
// failure, is what tells a lost rank from a survivor (in a ring a survivor may wait on another
// survivor, and learn of the loss only when that one gives up).
class Heartbeat {
 public:
  static constexpr std::chrono::milliseconds kPeriod{200};

  Heartbeat(c10::intrusive_ptr<c10d::Store> store, std::string key)
      : store_(std::move(store)), key_(std::move(key)), thread_([this] { loop(); }) {}
  ~Heartbeat() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      lock.unlock();
      try {
        store_->add(key_, 1);
      } catch (const std::exception&) {
        // The store is gone (torchrun tearing down): nobody is left to read the beats.
      }
      lock.lock();
      wake_.wait_for(lock, kPeriod, [this] { return stop_; });
    }
  }

  c10::intrusive_ptr<c10d::Store> store_;
  std::string key_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;  // last: started once the rest is built
};

std::string beat_key(int rank) { return "tc/beat/" + std::to_string(rank); }
std::string alive_key(int rank) { return "tc/alive/" + std::to_string(rank); }

}  // namespace

struct ProcessGroup::Impl {
  LaunchEnv env;
  GroupOptions options;
  c10::intrusive_ptr<c10d::Store> store;    // prefixed per attempt
  c10::intrusive_ptr<c10d::Backend> backend;
  c10::intrusive_ptr<c10d::ProcessGroup> group;  // what the Reducer takes
  c10::Device device = c10::Device(c10::kCPU);
  std::unique_ptr<Heartbeat> heartbeat;  // null when the second connection could not be made

  [[noreturn]] void lost(const std::string& what, const std::exception& e, ProcessGroup& self) {
    std::ostringstream m;
    m << "rank " << env.rank << ": " << what << " failed: " << first_line(e.what());
    const LostRanks seen = self.find_lost_ranks(std::chrono::seconds(3));
    const auto list = [&](const std::vector<int>& ranks) {
      for (size_t i = 0; i < ranks.size(); ++i) m << (i ? ", " : " ") << ranks[i];
    };
    if (!seen.store_answered) {
      m << "; could not tell which rank is lost (the store did not answer)";
    } else {
      if (!seen.lost.empty()) {
        m << "; lost rank" << (seen.lost.size() > 1 ? "s" : "");
        list(seen.lost);
        m << (seen.heartbeats ? " (no heartbeat on the store for 3 s)" : " (did not check in on the store)");
      } else if (!seen.waiting.empty()) {
        m << "; no rank is lost as far as the store can tell";
      }
      if (!seen.waiting.empty()) {
        m << "; rank" << (seen.waiting.size() > 1 ? "s" : "");
        list(seen.waiting);
        m << " alive (heartbeat on the store), not yet out of the collective";
      }
    }
    throw PeerLost(m.str());
  }

  template <typename F>
  void run(const std::string& what, ProcessGroup& self, F&& f) {
    try {
      f();
    } catch (const PeerLost&) {
      throw;
    } catch (const std::exception& e) {
      lost(what, e, self);
    }
  }
};

ProcessGroup::ProcessGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProcessGroup::~ProcessGroup() = default;

std::shared_ptr<ProcessGroup> ProcessGroup::create(const LaunchEnv& env, const GroupOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->env = env;
  impl->options = options;
  // As torch.distributed's env:// rendezvous: a client of the agent's store when torchrun hosts
  // one, else rank 0 serves; keys prefixed per restart attempt so a restarted group starts clean.
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(env.master_port);
  so.isServer = !env.use_agent_store && env.rank == 0;
  so.numWorkers = env.world_size;
  so.waitWorkers = false;
  so.timeout = options.timeout;
  c10::intrusive_ptr<c10d::Store> tcp;
  try {
    tcp = c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
  } catch (const std::exception& e) {
    throw std::runtime_error("rank " + std::to_string(env.rank) + ": cannot reach the store at " +
                             env.master_addr + ":" + std::to_string(env.master_port) + ": " +
                             first_line(e.what()));
  }
  // Groups made one after another in a process (every rank in the same order) get keys of their own.
  static std::atomic<int> groups{0};
  const std::string group_prefix = "tc_group_" + std::to_string(groups++);
  impl->store = c10::make_intrusive<c10d::PrefixStore>(
      group_prefix,
      c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + std::to_string(env.restart_count), tcp));

  c10d::ProcessGroup::BackendType type;
  if (options.backend == Backend::kGloo) {
    auto o = c10d::ProcessGroupGloo::Options::create(options.timeout);
    // Loopback launches bind Gloo to 127.0.0.1; others to this host's address (GLOO_SOCKET_IFNAME
    // picks an interface, as in PyTorch).
    if (auto ifname = get_env("GLOO_SOCKET_IFNAME")) {
      o->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(*ifname));
    } else if (is_loopback(env.master_addr)) {
      o->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    } else {
      o->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
    impl->backend = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>("gloo", impl->store), env.rank, env.world_size, o);
    type = c10d::ProcessGroup::BackendType::GLOO;
  } else {
    impl->backend = make_nccl_backend(c10::make_intrusive<c10d::PrefixStore>("nccl", impl->store),
                                      env.rank, env.world_size, env.local_rank, options.timeout);
    impl->device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank));
    type = c10d::ProcessGroup::BackendType::NCCL;
  }
  try {
    c10d::TCPStoreOptions beat = so;
    beat.isServer = false;
    beat.timeout = std::min<std::chrono::milliseconds>(options.timeout, std::chrono::seconds(2));
    auto client = c10::make_intrusive<c10d::PrefixStore>(
        group_prefix,
        c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + std::to_string(env.restart_count),
                                               c10::make_intrusive<c10d::TCPStore>(env.master_addr, beat)));
    impl->heartbeat = std::make_unique<Heartbeat>(std::move(client), beat_key(env.rank));
  } catch (const std::exception&) {
    // Without beats a lost rank is told by its missing check-in alone (see find_lost_ranks).
  }
  impl->backend->setGroupUid("default_pg");
  impl->group = c10::make_intrusive<c10d::ProcessGroup>(impl->store, env.rank, env.world_size);
  impl->group->setDefaultBackend(type);
  impl->group->setBackend(impl->device.type(), type, impl->backend);
  return std::shared_ptr<ProcessGroup>(new ProcessGroup(std::move(impl)));
}

int ProcessGroup::rank() const { return impl_->env.rank; }
int ProcessGroup::size() const { return impl_->env.world_size; }
Backend ProcessGroup::backend() const { return impl_->options.backend; }
const LaunchEnv& ProcessGroup::env() const { return impl_->env; }
std::chrono::milliseconds ProcessGroup::timeout() const { return impl_->options.timeout; }

void ProcessGroup::allreduce_sum(std::vector<at::Tensor>& tensors) {
  impl_->run("all_reduce", *this, [&] {
    c10d::AllreduceOptions o;
    o.reduceOp = c10d::ReduceOp::SUM;
    o.timeout = impl_->options.timeout;
    impl_->backend->allreduce(tensors, o)->wait(impl_->options.timeout);
  });
}

void ProcessGroup::broadcast(std::vector<at::Tensor>& tensors, int root) {
  impl_->run("broadcast", *this, [&] {
    c10d::BroadcastOptions o;
    o.rootRank = root;
    o.timeout = impl_->options.timeout;
    impl_->backend->broadcast(tensors, o)->wait(impl_->options.timeout);
  });
}

void ProcessGroup::barrier() {
  impl_->run("barrier", *this, [&] {
    c10d::BarrierOptions o;
    o.timeout = impl_->options.timeout;
    if (impl_->device.is_cuda()) o.device_ids = {impl_->device.index()};
    impl_->backend->barrier(o)->wait(impl_->options.timeout);
  });
}

std::vector<at::Tensor> ProcessGroup::all_gather(const at::Tensor& tensor) {
  std::vector<std::vector<at::Tensor>> out(1);
  for (int r = 0; r < size(); ++r) out[0].push_back(at::empty_like(tensor));
  std::vector<at::Tensor> in{tensor.contiguous()};
  impl_->run("all_gather", *this, [&] {
    c10d::AllgatherOptions o;
    o.timeout = impl_->options.timeout;
    impl_->backend->allgather(out, in, o)->wait(impl_->options.timeout);
  });
  return out[0];
}

void ProcessGroup::store_set(const std::string& key, const std::string& value) {
  impl_->store->set(key, std::vector<uint8_t>(value.begin(), value.end()));
}

std::string ProcessGroup::store_get(const std::string& key) {
  const std::vector<uint8_t> v = impl_->store->get(key);
  return std::string(v.begin(), v.end());
}

void ProcessGroup::raise_lost(const std::string& what, const std::exception& e) {
  impl_->lost(what, e, *this);
}

LostRanks ProcessGroup::find_lost_ranks(std::chrono::milliseconds grace) {
  // Every survivor of a failed collective checks in; one that has not by the end of `grace` is
  // lost only if its heartbeat stood still over that time (a survivor blocked on another survivor
  // beats on). Without beats (no second connection), a missing check-in alone names it.
  LostRanks out;
  try {
    Impl& impl = *impl_;
    impl.store->set(alive_key(rank()), std::vector<uint8_t>{'1'});
    const bool beats = impl.heartbeat != nullptr;
    const auto beat_of = [&](int r) { return impl.store->add(beat_key(r), 0); };
    std::vector<int64_t> before(size(), 0);
    if (beats) {
      for (int r = 0; r < size(); ++r) before[r] = r == rank() ? 0 : beat_of(r);
    }
    const auto deadline = std::chrono::steady_clock::now() + grace;
    std::vector<int> missing;
    for (;;) {
      missing.clear();
      for (int r = 0; r < size(); ++r) {
        if (r != rank() && !impl.store->check({alive_key(r)})) missing.push_back(r);
      }
      if (missing.empty() || std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    out.store_answered = true;
    out.heartbeats = beats;
    for (int r : missing) {
      if (beats && beat_of(r) > before[r]) {
        out.waiting.push_back(r);
      } else {
        out.lost.push_back(r);
      }
    }
  } catch (const std::exception&) {
    out = LostRanks{};
  }
  return out;
}

std::vector<int> ProcessGroup::lost_ranks(std::chrono::milliseconds grace) {
  return find_lost_ranks(grace).lost;
}

// --- GradientReducer -------------------------------------------------------------------------

struct GradientReducer::Impl {
  std::shared_ptr<c10d::Reducer> reducer;
  size_t buckets = 0;
};

GradientReducer::GradientReducer(ProcessGroup& group, std::vector<at::Tensor> parameters,
                                 int64_t bucket_bytes)
    : impl_(std::make_unique<Impl>()) {
  // DDP's constructor: every replica starts from rank 0's parameters.
  {
    at::NoGradGuard no_grad;
    for (at::Tensor& p : parameters) {
      std::vector<at::Tensor> one{p};
      group.broadcast(one, 0);
    }
  }
  const std::vector<bool> sparse(parameters.size(), false);
  auto [bucket_indices, per_bucket_limits] = c10d::compute_bucket_assignment_by_size(
      parameters, {static_cast<size_t>(bucket_bytes)}, sparse);
  (void)per_bucket_limits;
  impl_->buckets = bucket_indices.size();
  impl_->reducer = std::make_shared<c10d::Reducer>(
      parameters, bucket_indices, group.impl().group, sparse, bucket_bytes,
      /*find_unused_parameters=*/false, /*gradient_as_bucket_view=*/false,
      std::unordered_map<size_t, std::string>{}, /*first_bucket_bytes_cap=*/bucket_bytes,
      /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false,
      std::vector<int64_t>{});
}

GradientReducer::~GradientReducer() = default;

void GradientReducer::prepare_for_backward(const std::vector<at::Tensor>& outputs) {
  impl_->reducer->prepare_for_backward(outputs);
}

size_t GradientReducer::buckets() const { return impl_->buckets; }

}  // namespace tc::ref::dist
