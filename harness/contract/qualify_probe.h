// Qualification probes (`torchconform qualify`): what one rank measures on its device, and the one
// registration through which suites/qualify_probes hands its worker to the CLI. The harness core launches
// torchrun, calls the worker on every rank, judges rank 0's gathered figures (harness/qualify/qualify.h)
// and formats them; the probes themselves need LibTorch and c10d and live in suites/qualify_probes.
//
//   static const bool registered = tc::qualify::set_worker([](const tc::qualify::WorkerOptions& o) {
//     ... every rank measures, rank 0 returns every rank's RankResult, the others return {} ...
//   });
//
// No torch here.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tc::qualify {

// One probe's figure on one rank: every repetition's value and their median (the figure judged).
// Every figure is "higher is better" (a rate: TFLOP/s, GB/s).
struct Figure {
  std::string name;  // "matmul", "copy", "h2d", "allreduce"
  std::string unit;  // "TFLOP/s", "GB/s"
  std::vector<double> samples;
  double median = 0.0;
  std::string detail;  // what was measured, e.g. "bf16 4096x4096 @ 4096x4096, TF32 off"
};

// The same-seed training run of one rank: equal on every healthy device running the same binary.
// `record` is the training fingerprint every report uses (metrics.fingerprint, format
// "torchconform.fingerprint/1", docs/reports.md), as training_fingerprint() makes it
// (suites/support/fingerprint.h); equality is over its losses' exact values and its parameters' digest.
struct Fingerprint {
  nlohmann::json record = nlohmann::json::object();
  std::string params_sha256() const;  // record.params.sha256 ("" when absent)
  std::string digest() const;         // params.sha256 and every loss_hex, for equality
};

struct RankResult {
  int rank = 0;
  std::string host;
  std::string device;     // "cpu", "cuda:0"
  std::string device_id;  // CPU: "cores 0-3"; CUDA: name, UUID and PCI bus id
  std::vector<Figure> figures;
  Fingerprint fingerprint;
  std::vector<std::string> notes;  // e.g. "slowed by the test hook" (said, never hidden)
};

nlohmann::json to_json(const RankResult& r);
// Throws std::invalid_argument naming the field that is missing or has the wrong type.
RankResult rank_result_from_json(const nlohmann::json& j);

struct WorkerOptions {
  std::string device = "cpu";  // cpu | cuda (one rank per GPU, cuda:LOCAL_RANK)
  int repetitions = 5;         // of each probe; the median is kept
  int timeout_ms = 120000;     // of the process group's collectives and store reads
};

// What every rank runs under torchrun: the probes, in lockstep (barriers between them). Rank 0
// returns every rank's result in rank order; the other ranks return an empty vector. Throws
// std::runtime_error when a probe or the group fails.
using Worker = std::function<std::vector<RankResult>(const WorkerOptions&)>;

// Registers the one worker (static registration from suites/qualify_probes); a second throws
// std::logic_error. Returns true, for `static const bool x = set_worker(...)`.
bool set_worker(Worker worker);
// The registered worker; nullptr in a binary without suites/qualify_probes.
const Worker* worker();

}  // namespace tc::qualify
