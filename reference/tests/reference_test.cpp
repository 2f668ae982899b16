#include <array>
#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <fstream>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "harness/contract/scratch.h"
#include "harness/testing/test_paths.h"
#include "reference/derived_model.h"
#include "reference/recompute.h"
#include "reference/reference_run.h"
#include "suites/support/tensor_compare.h"

namespace tc::ref {
namespace {

TEST(Loader, WorkersDeliverInOrderTheSameBatchesAsTheTrainingThread) {
  auto make = [](int64_t i) {
    Batch b;
    b.index = i;
    b.images = augment(torch::ones({4, 3, 8, 8}) * static_cast<double>(i), batch_seed(42, i));
    b.labels = torch::full({4}, i, torch::kLong);
    return b;
  };
  for (int64_t workers : {1, 3}) {
    Loader threaded(2, 11, {workers, 2}, make);
    Loader inline_loader(2, 11, {0, 2}, make);
    for (int64_t i = 2; i < 11; ++i) {
      auto a = threaded.next();
      auto b = inline_loader.next();
      ASSERT_TRUE(a && b);
      EXPECT_EQ(a->index, i);
      EXPECT_TRUE(torch::equal(a->images, b->images)) << "batch " << i << " workers " << workers;
    }
    EXPECT_FALSE(threaded.next().has_value());
  }
}

TEST(Loader, RethrowsAWorkersError) {
  for (int repeat = 0; repeat < 20; ++repeat) {
    Loader l2(0, 4, {2, 1}, [](int64_t i) -> Batch {
      if (i == 1) throw std::runtime_error("decode failed");
      return Batch{i, torch::zeros({1}), torch::zeros({1})};
    });
    auto first = l2.next();  // batch 0 comes first, whatever the workers' timing
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(first->index, 0);
    EXPECT_THROW(l2.next(), std::runtime_error);
    EXPECT_THROW(l2.next(), std::runtime_error);  // and again, never a hang
  }
}

TEST(Loader, StopsCleanlyWithBatchesInFlight) {
  std::atomic<int> made{0};
  {
    Loader l(0, 100, {2, 2}, [&](int64_t i) {
      ++made;
      return Batch{i, torch::zeros({1}), torch::zeros({1})};
    });
    l.next();
  }
  EXPECT_LE(made.load(), 1 + 2 * 2 + 2);  // bounded by the prefetch depth
}

TEST(Augment, SameSeedSameBatchOtherSeedOtherBatch) {
  at::Tensor x = torch::randn({8, 3, 16, 16}, seeded_generator(1));
  EXPECT_TRUE(torch::equal(augment(x, 7), augment(x, 7)));
  EXPECT_FALSE(torch::equal(augment(x, 7), augment(x, 8)));
  EXPECT_NE(batch_seed(5, 0), batch_seed(5, 1));
}

TEST(Sampler, EpochsReshuffleAndRestoreContinues) {
  SeededSampler a(32, 8, seeded_generator(3));
  a.set_epoch(0);
  at::Tensor p0 = a.permutation().clone();
  a.set_epoch(1);
  EXPECT_FALSE(torch::equal(p0, a.permutation()));
  EXPECT_EQ(a.batches_per_epoch(), 4);
  EXPECT_EQ(std::get<0>(torch::sort(a.permutation())).equal(torch::arange(32)), true);
  SeededSampler b(32, 8, seeded_generator(99));
  b.restore(1, a.permutation(), a.epoch_seed());
  EXPECT_TRUE(torch::equal(a.batch_indices(2), b.batch_indices(2)));
  EXPECT_THROW(b.restore(1, torch::arange(5), 1), c10::Error);
}

TEST(Seed, SeedEverythingSeedsTorchAndOwnedGeneratorsAndRecordsDeterminism) {
  at::Generator g = nondeterministic_generator();
  SeedRecord r = seed_everything(11, true, {g});
  EXPECT_TRUE(r.seeded);
  EXPECT_TRUE(r.deterministic);
  EXPECT_TRUE(at::globalContext().deterministicAlgorithms());
  at::Tensor a = torch::rand({4});
  at::Tensor ga = torch::rand({4}, g);
  seed_everything(11, false, {g});
  EXPECT_FALSE(at::globalContext().deterministicAlgorithms());
  EXPECT_TRUE(torch::equal(a, torch::rand({4})));
  EXPECT_TRUE(torch::equal(ga, torch::rand({4}, g)));
}

TEST(Model, ExplicitInitAndShapes) {
  torch::manual_seed(0);
  ImageClassifier m(4, 16);
  init_weights(*m);
  auto params = m->named_parameters();
  EXPECT_TRUE(torch::equal(params["features.1.weight"], torch::ones({16})));
  EXPECT_EQ(params["classifier.1.bias"].abs().sum().item<double>(), 0.0);
  EXPECT_NEAR(params["classifier.1.weight"].std().item<double>(), 0.01, 0.001);
  EXPECT_EQ(m->forward(torch::randn({2, 3, 16, 16})).sizes(), (std::vector<int64_t>{2, 4}));
}

// A derived model that replaces forward (another head on the same features), the way a recipe author
// does it (reference/derived_model.h), and the same written by accident around the option.
struct ScaledHeadImpl : ImageClassifierImpl {
  using ImageClassifierImpl::ImageClassifierImpl;
  torch::Tensor forward(torch::Tensor x) override {
    x = extract_features(x);
    return classifier->forward(x.flatten(1)) * 0.5;
  }
};
struct BypassesCheckpointingImpl : ImageClassifierImpl {
  using ImageClassifierImpl::ImageClassifierImpl;
  torch::Tensor forward(torch::Tensor x) override {
    x = features->forward(x);
    return classifier->forward(x.flatten(1)) * 0.5;
  }
};

// How often a training forward + backward ran the feature extractor as a recomputable segment:
// 2 with activation checkpointing (the forward, then the recomputation in backward), 0 without.
template <typename Impl>
int segment_runs(bool recompute_features) {
  torch::manual_seed(0);
  ImageClassifier m = make_classifier<Impl>(4, 16);
  m->recompute_features = recompute_features;
  m->train();
  int runs = 0;
  auto* impl = m.get();
  impl->features_segment = [impl, &runs](const torch::Tensor& t) {
    ++runs;
    return impl->features->forward(t);
  };
  m->forward(torch::randn({2, 3, 16, 16})).sum().backward();
  EXPECT_TRUE(m->features->parameters()[0].grad().defined());
  return runs;
}

TEST(DerivedModel, AnOverriddenForwardThatCallsExtractFeaturesKeepsActivationCheckpointing) {
  EXPECT_EQ(segment_runs<ImageClassifierImpl>(true), 2);  // the reference itself
  EXPECT_EQ(segment_runs<ScaledHeadImpl>(true), 2);
  EXPECT_EQ(segment_runs<ScaledHeadImpl>(false), 0);      // the option off: plain backprop
  // the accident the protected step exists for: the option silently dropped
  EXPECT_EQ(segment_runs<BypassesCheckpointingImpl>(true), 0);
}

TEST(DerivedModel, IsInitialisedLikeTheReference) {
  torch::manual_seed(1);
  ImageClassifier derived = make_classifier<ScaledHeadImpl>(4, 16);
  auto params = derived->named_parameters();
  EXPECT_TRUE(torch::equal(params["features.1.weight"], torch::ones({16})));
  EXPECT_EQ(params["classifier.1.bias"].abs().sum().item<double>(), 0.0);
  EXPECT_NEAR(params["classifier.1.weight"].std().item<double>(), 0.01, 0.001);
}

// Saves only the model, like a weights-only checkpoint.
class ModelOnly : public ReferenceRun {
 protected:
  std::vector<CheckpointPart> checkpoint_parts() override {
    auto parts = ReferenceRun::checkpoint_parts();
    parts.resize(1);
    return parts;
  }
};

TEST(Checkpoint, MissingPartAndCorruptFileGiveClearErrors) {
  Scratch dir;
  RunOptions o;
  o.seed = 5;
  ModelOnly weights;
  weights.setup(o);
  weights.train_step();
  const std::string path = dir.file("ckpt.pt");
  weights.save_checkpoint(path);
  ReferenceRun run;
  run.setup(o);
  try {
    run.load_checkpoint(path);
    FAIL() << "a checkpoint without optimizer state was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no 'optimizer' state"), std::string::npos) << e.what();
  }
  // A foreign model's state (one tensor 'x'): the strict load names what does not match.
  save_parts({{"model", [](auto& a) { a.write("x", torch::ones({1})); }, nullptr}}, path);
  try {
    load_model_part_strict(*run.bare_model(), path);
    FAIL() << "a checkpoint with a foreign model was accepted";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("model state does not match the model:"), std::string::npos) << what;
    EXPECT_NE(what.find("unexpected x"), std::string::npos) << what;
    EXPECT_NE(what.find("missing "), std::string::npos) << what;
    EXPECT_EQ(what.find("frame #"), std::string::npos) << "backtrace in a user message";
  }
  std::ofstream(dir.file("junk.pt")) << "not a checkpoint";
  try {
    run.load_checkpoint(dir.file("junk.pt"));
    FAIL() << "junk accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("junk.pt"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, SaveIsAtomicAndReplacesThePreviousFile) {
  Scratch dir;
  ReferenceRun run;
  run.setup(RunOptions{});
  const std::string path = dir.file("ckpt.pt");
  run.save_checkpoint(path);
  run.train_step();
  run.save_checkpoint(path);
  int entries = 0;
  if (DIR* d = opendir(dir.file("").c_str())) {
    while (const dirent* e = readdir(d)) entries += std::string(e->d_name) != "." && std::string(e->d_name) != "..";
    closedir(d);
  }
  EXPECT_EQ(entries, 1) << "temporary files left behind";
  ReferenceRun fresh;
  fresh.setup(RunOptions{});
  fresh.load_checkpoint(path);
  EXPECT_FALSE(first_tensor_difference(snapshot(run.parameters()), snapshot(fresh.parameters())));
}

}  // namespace
}  // namespace tc::ref

namespace tc::ref {
namespace {

// Recomputation replays the forward's dropout mask and gives plain backprop's gradients bitwise,
// also when the input does not require grad (the non-reentrant behaviour).
TEST(Recompute, MatchesPlainBackpropWithDropoutAndGradFreeInput) {
  torch::manual_seed(3);
  torch::nn::Sequential block(torch::nn::Linear(8, 32), torch::nn::ReLU(), torch::nn::Dropout(0.5),
                              torch::nn::Linear(32, 4));
  Segment segment = [&](const at::Tensor& t) { return block->forward(t); };
  const at::Tensor x = torch::randn({16, 8});
  auto grads = [&](bool use_recompute) {
    block->zero_grad();
    torch::manual_seed(11);
    at::Tensor y = use_recompute ? recompute(segment, x, block->parameters()) : block->forward(x);
    (void)torch::rand({3});  // draws between forward and backward must not disturb the replay
    y.pow(2).sum().backward();
    std::vector<at::Tensor> g;
    for (const auto& p : block->parameters()) g.push_back(p.grad().clone());
    return g;
  };
  auto plain = grads(false);
  auto again = grads(true);
  ASSERT_EQ(plain.size(), again.size());
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_TRUE(torch::equal(plain[i], again[i])) << i;
  // and the global stream continues where it would have
  torch::manual_seed(5);
  (void)recompute(segment, x.requires_grad_(true), block->parameters()).sum().backward();
  at::Tensor after = torch::rand({2});
  torch::manual_seed(5);
  (void)block->forward(x).sum();
  EXPECT_TRUE(torch::equal(after, torch::rand({2})));
}

}  // namespace
}  // namespace tc::ref

namespace tc::ref {
namespace {

// Saves `from`'s state and loads it strictly into `into`: the error text, or "" when it loaded.
std::string strict_load(torch::nn::Module& from, torch::nn::Module& into) {
  torch::serialize::OutputArchive out;
  from.save(out);
  std::ostringstream bytes;
  out.save_to(bytes);
  torch::serialize::InputArchive in;
  const std::string b = bytes.str();
  in.load_from(b.data(), b.size());
  try {
    load_module_strict(into, in);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(StrictLoad, MissingUnexpectedWrongShapeAndWrongDtypeAreRefusedAndTheModelIsUntouched) {
  torch::nn::Sequential two(torch::nn::Linear(4, 3), torch::nn::Linear(3, 2));
  torch::nn::Sequential one(torch::nn::Linear(4, 3));
  torch::nn::Sequential wide(torch::nn::Linear(4, 5), torch::nn::Linear(5, 2));
  auto params_of = [](torch::nn::Module& m) {
    NamedTensors out;
    for (const auto& p : m.named_parameters()) out.emplace_back(p.key(), p.value());
    return snapshot(out);
  };
  auto before = params_of(*two);
  std::string e = strict_load(*one, *two);
  EXPECT_NE(e.find("missing 1.weight, 1.bias"), std::string::npos) << e;
  e = strict_load(*two, *one);
  EXPECT_NE(e.find("unexpected 1.bias, 1.weight"), std::string::npos) << e;
  e = strict_load(*wide, *two);
  EXPECT_NE(e.find("wrong shape 0.weight [5, 4] vs [3, 4]"), std::string::npos) << e;
  // A checkpoint written from a model cast to half: named tensor by tensor, dtype against dtype.
  torch::nn::Sequential half(torch::nn::Linear(4, 3), torch::nn::Linear(3, 2));
  half->to(torch::kHalf);
  e = strict_load(*half, *two);
  EXPECT_NE(e.find("wrong dtype '0.weight': checkpoint has Half, model has Float"), std::string::npos) << e;
  EXPECT_NE(e.find("'1.bias': checkpoint has Half, model has Float"), std::string::npos) << e;
  EXPECT_EQ(e.find("storage"), std::string::npos) << e;
  auto after = params_of(*two);
  EXPECT_FALSE(first_tensor_difference(before, after)) << "a refused load changed the model";
  torch::nn::Sequential twin(torch::nn::Linear(4, 3), torch::nn::Linear(3, 2));
  EXPECT_EQ(strict_load(*two, *twin), "");
  EXPECT_TRUE(torch::equal(twin->parameters()[0], two->parameters()[0]));
}

// The same state in the layouts other code writes: dotted keys at one level (PyTorch's state_dict
// names), a Dict[str, Tensor] entry (a state dict as one value), nested (Module::save). Each loads
// strictly; a name given both nested and flat is refused.
TEST(StrictLoad, FlatKeysAndADictEntryLoadLikeNestedArchives) {
  torch::nn::Sequential from(torch::nn::Linear(4, 3), torch::nn::BatchNorm1d(3));
  from->named_buffers()["1.running_mean"].fill_(0.25);
  auto load = [&](const std::function<void(torch::serialize::OutputArchive&)>& write) {
    torch::serialize::OutputArchive out;
    write(out);
    std::ostringstream bytes;
    out.save_to(bytes);
    const std::string b = bytes.str();
    torch::serialize::InputArchive in;
    in.load_from(b.data(), b.size());
    torch::nn::Sequential into(torch::nn::Linear(4, 3), torch::nn::BatchNorm1d(3));
    load_module_strict(*into, in);
    EXPECT_TRUE(torch::equal(into->named_parameters()["0.weight"], from->named_parameters()["0.weight"]));
    EXPECT_TRUE(torch::equal(into->named_buffers()["1.running_mean"], from->named_buffers()["1.running_mean"]));
  };
  load([&](auto& a) {
    for (const auto& p : from->named_parameters()) a.write(p.key(), p.value());
    for (const auto& b : from->named_buffers()) a.write(b.key(), b.value(), /*is_buffer=*/true);
  });
  load([&](auto& a) {
    c10::Dict<std::string, at::Tensor> d;
    for (const auto& p : from->named_parameters()) d.insert(p.key(), p.value().detach());
    for (const auto& b : from->named_buffers()) d.insert(b.key(), b.value());
    a.write("state_dict", c10::IValue(d));
  });
  load([&](auto& a) { from->save(a); });
  torch::serialize::OutputArchive both;
  from->save(both);
  both.write("0.weight", from->named_parameters()["0.weight"]);
  std::ostringstream bytes;
  both.save_to(bytes);
  const std::string b = bytes.str();
  torch::serialize::InputArchive in;
  in.load_from(b.data(), b.size());
  torch::nn::Sequential into(torch::nn::Linear(4, 3), torch::nn::BatchNorm1d(3));
  try {
    load_module_strict(*into, in);
    ADD_FAILURE() << "a name given nested and flat loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("given twice (nested and flat) 0.weight"), std::string::npos) << e.what();
  }
}

// A checkpoint whose part holds a Dict[str, Tensor] passes the file checks (the container's type
// tag is parsed, not taken for a class) and loads.
TEST(CheckpointFile, ADictEntryPassesTheChecksAndLoads) {
  Scratch dir;
  const std::string path = dir.file("c.pt");
  c10::Dict<std::string, at::Tensor> d;
  d.insert("w", torch::arange(6, torch::kFloat));
  save_parts({{"model", [&](auto& a) { a.write("state_dict", c10::IValue(d)); }, nullptr}}, path);
  c10::IValue got;
  load_parts({{"model", nullptr, [&](auto& a) { a.read("state_dict", got); }}}, path, torch::kCPU);
  ASSERT_TRUE(got.isGenericDict());
  EXPECT_TRUE(torch::equal(got.toGenericDict().at("w").toTensor(), torch::arange(6, torch::kFloat)));
}

// A checkpoint file is first parsed in a child process under a memory and a time limit: a file that
// needs more is refused with the limit named, nothing loaded, this process unharmed; within the
// limits it loads as before.
TEST(CheckpointFile, AParseOverItsLimitsIsRefusedInAChildProcess) {
  Scratch dir;
  const std::string path = dir.file("big.pt");
  const at::Tensor big = torch::arange(12 * 1024 * 1024, torch::kFloat);  // 48 MiB
  save_parts({{"model", [&](auto& a) { a.write("w", big); }, nullptr}}, path);
  auto load = [&] {
    at::Tensor got;
    load_parts({{"model", nullptr, [&](auto& a) { a.read("w", got); }}}, path, torch::kCPU);
    return got;
  };
  auto refusal = [&]() -> std::string {
    try {
      load();
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  };
  setenv("TORCHCONFORM_PARSE_MEMORY_MB", "16", 1);
  std::string e = refusal();
  EXPECT_NE(e.find("refused: reading checkpoint '" + path + "' needs more than 16 MiB of memory"), std::string::npos) << e;
  unsetenv("TORCHCONFORM_PARSE_MEMORY_MB");
  setenv("TORCHCONFORM_PARSE_SECONDS", "0.000001", 1);
  e = refusal();
  EXPECT_NE(e.find("needs more than 1e-06 s (TORCHCONFORM_PARSE_SECONDS"), std::string::npos) << e;
  setenv("TORCHCONFORM_PARSE_SECONDS", "soon", 1);
  e = refusal();
  EXPECT_NE(e.find("TORCHCONFORM_PARSE_SECONDS='soon' is not a positive number"), std::string::npos) << e;
  unsetenv("TORCHCONFORM_PARSE_SECONDS");
  EXPECT_TRUE(torch::equal(load(), big));  // within the limits (the defaults): loaded
}

// A file whose first line carries the right hash of a hostile archive on which LibTorch's unpickler
// asks for about 28 GiB (reference/fuzz/known_issues/unpickler-30GB-allocation.file, found by
// tc_fuzz_checkpoint): refused as a checkpoint error, nothing loaded, this process unharmed.
TEST(CheckpointFile, AHashedArchiveAskingForHugeMemoryIsRefused) {
  const std::string path =
      std::string(test_paths::source_dir()) + "/reference/fuzz/known_issues/unpickler-30GB-allocation.file";
  std::string error;
  try {
    load_parts({{"model", nullptr, [&](auto& a) {
                   c10::IValue v;
                   a.read("w", v);
                 }}},
               path, torch::kCPU);
  } catch (const std::runtime_error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("refused: reading checkpoint '" + path + "' needs more than"), std::string::npos) << error;
  EXPECT_NE(error.find("MiB of memory"), std::string::npos) << error;
}

TEST(CheckpointFile, AFlippedPayloadByteFailsTheHash) {
  Scratch dir;
  const std::string path = dir.file("c.pt");
  save_parts({{"model", [](auto& a) { a.write("w", torch::arange(4096, torch::kFloat)); }, nullptr}}, path);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign((std::istreambuf_iterator<char>(in)), {});
  }
  EXPECT_NO_THROW(open_checkpoint(path, torch::kCPU));
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // Flip one bit in the middle of the payload (the tensor data dominates the file).
  bytes[bytes.size() / 2] ^= 0x10;
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  try {
    open_checkpoint(path, torch::kCPU);
    FAIL() << "a flipped checkpoint opened";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("c.pt"), std::string::npos) << e.what();
  }
}

// The data-wait measurement against a producer and a consumer of known cost, both sleeping so
// that neither depends on how busy this machine's cores are. Producer cost P per batch, device
// step T; steady state (after warm-up): workers 0 -> wait P per step, fraction P / (P + T);
// one worker with P > T -> wait P - T, fraction (P - T) / P; producers faster than the device ->
// no wait. Tolerance 0.07 absolute: sleep_for overshoots by up to ~1 ms per call on this shared
// 2-core machine (seen: 0.1-0.8 ms), i.e. a few percent of a 10-20 ms period.
double measured_fraction(int64_t workers, int64_t prefetch, int producer_ms, int step_ms) {
  auto make = [producer_ms](int64_t i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(producer_ms));
    return Batch{i, torch::zeros({2, 1}), torch::zeros({2})};
  };
  const int64_t warmup = 3, steps = 20;
  Loader loader(0, warmup + steps, {workers, prefetch}, make);
  SimulatedDevice device{std::chrono::milliseconds(step_ms)};
  DataWaitStats s = time_data_wait(
      [&]() -> int64_t {
        auto b = loader.next();
        return b ? b->images.size(0) : 0;
      },
      [&] { device.step(); }, warmup, steps);
  EXPECT_EQ(s.steps, steps);
  EXPECT_EQ(s.samples, 2 * steps);
  return s.fraction();
}

TEST(DataWait, WorkersZeroWaitsTheWholeProducerCostEachStep) {
  EXPECT_NEAR(measured_fraction(0, 1, 5, 10), 5.0 / 15.0, 0.07);
}

TEST(DataWait, OneSlowWorkerLeavesTheDeviceWaitingTheDifference) {
  EXPECT_NEAR(measured_fraction(1, 2, 20, 10), 10.0 / 20.0, 0.07);
}

TEST(DataWait, EnoughWorkersWithPrefetchKeepTheDeviceFed) {
  EXPECT_LT(measured_fraction(1, 2, 5, 10), 0.07);
  EXPECT_LT(measured_fraction(2, 2, 15, 10), 0.07);
}

// One worker per core, one core left to a host that trains itself, at least 1, at most 8: the
// values written out per core count (not the formula again).
TEST(DataWait, DefaultWorkersFollowsTheMachine) {
  const std::vector<std::array<int64_t, 3>> want = {
      // cores, workers on an accelerator, workers when the host trains
      {0, 1, 1}, {1, 1, 1}, {2, 2, 1}, {4, 4, 3}, {8, 8, 7}, {9, 8, 8}, {16, 8, 8}};
  for (const auto& [cores, accel, host] : want) {
    EXPECT_EQ(default_workers(false, cores), accel) << cores << " cores";
    EXPECT_EQ(default_workers(true, cores), host) << cores << " cores";
  }
  EXPECT_EQ(default_workers(true), default_workers(true, std::thread::hardware_concurrency()));
}

TEST(DataWait, CostlyBlurIsDeterministicAndKeepsShape) {
  at::Tensor x = torch::randn({2, 3, 8, 8});
  at::Tensor a = costly_blur(x, 5);
  EXPECT_EQ(a.sizes(), x.sizes());
  EXPECT_TRUE(torch::equal(a, costly_blur(x, 5)));
  EXPECT_FALSE(torch::equal(a, x));
}

}  // namespace
}  // namespace tc::ref
