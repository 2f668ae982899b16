// Resilience of the checkpoint loader: torchconform reads checkpoints that may be corrupt or
// hostile, and writes checkpoints and reports that may not complete.
//
// - Corruption corpus: 1,000 truncations and 1,000 single-bit flips of a real checkpoint, at
//   positions drawn from a seeded RNG in named regions of the file. Every attempt runs in a forked
//   child (so a crash is counted, not fatal; a child goes on to the next attempt while each leaves
//   everything as it was) and must be rejected with a message naming the file, leave the
//   destination model as it was, and never load other content.
// - Hostile checkpoints, made by reference/tests/make_hostile_checkpoints.py with their hash
//   recomputed so that they reach LibTorch: pickles calling os.system / builtins.eval, a storage
//   shorter than its tensor, a tensor whose storage offset puts its view past its storage (LibTorch
//   2.15 rejects that one itself). Rejected, the canary file never created, the model untouched.
// - Writes that cannot complete: a file-size limit hit mid-write, a read-only directory. A clear
//   error, non-zero exit, the previous checkpoint and report intact byte for byte. (Here, not with
//   the report tests: each writes a checkpoint of the reference recipe and a report through the
//   command line, and only a test on this side of the include rule may include both.)
// - Fuzzing: the seed files ci/fuzz starts from (a checkpoint, its archive, a report), and the
//   checkpoint fuzzers' committed regressions, replayed.
// The report readers' side is in harness/tests/report_resilience_test.cpp; the helpers both use in
// harness/tests/resilience_support.h.
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "harness/contract/scratch.h"
#include "harness/fuzz/report_fuzz_body.h"
#include "harness/tests/resilience_support.h"
#include "harness/util/posix_fs.h"
#include "reference/checkpoint.h"
#include "reference/fuzz/checkpoint_fuzz_body.h"
#include "reference/reference_run.h"
#include "suites/support/tensor_compare.h"
#include "harness/testing/test_paths.h"

namespace tc {
namespace {

using namespace resilience;
using posix_fs::read_bytes;
using posix_fs::write_bytes;

uint32_t le32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + static_cast<size_t>(i)]);
  return v;
}

// Regions of a checkpoint file: the first line, the archive's records, its central directory,
// its end record(s).
std::vector<Region> checkpoint_regions(const std::string& file) {
  const size_t body = file.find('\n') + 1;
  const size_t eocd = file.rfind(std::string("PK\x05\x06", 4));
  const size_t eocd64 = file.rfind(std::string("PK\x06\x06", 4));
  if (body == 0 || eocd == std::string::npos || eocd < body) throw std::runtime_error("no zip end record");
  uint64_t cd = le32(file, eocd + 16);
  size_t end_records = eocd;
  if (cd == 0xFFFFFFFFu && eocd64 != std::string::npos) {
    cd = le32(file, eocd64 + 48) | (static_cast<uint64_t>(le32(file, eocd64 + 52)) << 32);
    end_records = eocd64;
  }
  const size_t cd_at = body + static_cast<size_t>(cd);
  if (!(body < cd_at && cd_at < end_records)) throw std::runtime_error("unexpected zip layout");
  return {{"first line", 0, body},
          {"archive records", body, cd_at},
          {"central directory", cd_at, end_records},
          {"end records", end_records, file.size()}};
}


// --- checkpoints ----------------------------------------------------------------------------------

// The valid checkpoint the corpus and the hostile files start from: the reference (seed 3) after
// `steps` training steps, saved at `path`. Returns the options it was set up with.
RunOptions trained_checkpoint(ref::ReferenceRun& run, const std::string& path, int steps) {
  RunOptions o;
  o.seed = 3;
  run.setup(o);
  for (int i = 0; i < steps; ++i) run.train_step();
  run.save_checkpoint(path);
  return o;
}

TEST(CorruptionCorpus, EveryCorruptCheckpointIsRejectedAndTheModelUntouched) {
  Scratch dir;
  const std::string good_path = dir.file("good.ckpt");
  ref::ReferenceRun run;
  RunOptions o = trained_checkpoint(run, good_path, 3);
  const std::string good = read_bytes(good_path);
  const NamedTensors saved = snapshot(run.parameters());

  ref::ReferenceRun dest;  // the destination: another seed, so a load would show
  o.seed = 11;
  dest.setup(o);
  const NamedTensors dest_before = snapshot(dest.parameters());
  ASSERT_TRUE(first_tensor_difference(saved, dest_before)) << "the two runs start equal: a load would not show";

  // Positive control: the good file loads, in a child, into the destination.
  const ChildResult control = in_child([&] {
    dest.load_checkpoint(good_path);
    return first_tensor_difference(saved, snapshot(dest.parameters())) ? "Dother" : "Ssame";
  });
  ASSERT_FALSE(control.crashed) << control.how;
  ASSERT_EQ(control.verdict, 'S') << control.message;

  const std::vector<Region> regions = checkpoint_regions(good);
  const std::string bad = dir.file("bad.ckpt");
  const std::vector<Corruption> plan = plan_corruptions(regions, kCorruptions, 20261129);
  // Many attempts in one child: it goes on only after a rejection that left the model as it was (R).
  const std::vector<ChildResult> results = in_children(plan.size(), [&](size_t i) -> std::string {
    write_bytes(bad, apply(good, plan[i]));
    try {
      dest.load_checkpoint(bad);
    } catch (const std::exception& e) {
      const std::string msg = e.what();
      if (first_tensor_difference(dest_before, snapshot(dest.parameters()))) return "T" + msg;
      if (msg.find(bad) == std::string::npos) return "M" + msg;
      return "R" + msg;
    }
    return first_tensor_difference(saved, snapshot(dest.parameters())) ? "Dloaded other state" : "Sloaded";
  }, "R");
  Tally tally;
  for (size_t i = 0; i < plan.size(); ++i) tally.add(plan[i], results[i]);
  std::cout << "[corpus] checkpoint: " << good.size() << " bytes; regions:";
  for (const Region& r : regions) std::cout << " " << r.name << " [" << r.begin << ", " << r.end << ")";
  std::cout << "\n";
  tally.print("checkpoint");
  EXPECT_EQ(tally.count('R'), 2 * kCorruptions);
  EXPECT_EQ(tally.crashed, 0);
  EXPECT_EQ(tally.count('D'), 0);
  EXPECT_EQ(tally.count('S'), 0);
  EXPECT_EQ(tally.count('T'), 0);
  EXPECT_EQ(tally.count('M'), 0);
  EXPECT_EQ(read_bytes(good_path), good) << "the good checkpoint changed";
}

// A string whose declared length runs past the pickle's end (one changed length byte: ci/fuzz's
// out-of-memory input) is refused before LibTorch's Unpickler sizes a string to it, naming the length.
TEST(CorruptionCorpus, ADeclaredStringLongerThanThePickleIsRefusedBeforeItIsAllocated) {
  const std::string file = read_bytes(std::string(tc::test_paths::source_dir()) +
                                      "/reference/fuzz/regressions/checkpoint/pickle-string-4gb.ckpt");
  try {
    (void)ref::open_checkpoint_bytes(file, "pickle-string-4gb.ckpt", torch::kCPU);
    FAIL() << "the checkpoint was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("declares a string of 4294964737 bytes"), std::string::npos) << e.what();
  }
}

// --- hostile checkpoints --------------------------------------------------------------------------

TEST(HostileCheckpoint, PicklesThatRunCodeAndShortStoragesAreRejectedWithNoSideEffect) {
  Scratch dir;
  const std::string good_path = dir.file("good.ckpt");
  ref::ReferenceRun run;
  RunOptions o = trained_checkpoint(run, good_path, 1);
  const NamedTensors saved = snapshot(run.parameters());
  ref::ReferenceRun dest;
  o.seed = 11;
  dest.setup(o);
  const NamedTensors dest_before = snapshot(dest.parameters());

  const std::string canary = dir.file("canary");
  const std::string out = dir.file("hostile");
  const std::string cmd = std::string(tc::test_paths::test_python()) + " " + tc::test_paths::source_dir() +
                          "/reference/tests/make_hostile_checkpoints.py '" + good_path + "' '" + out +
                          "' '" + canary + "'";
  std::cout << "[hostile] " << cmd << "\n";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "the hostile files could not be made";

  // Control: the archive rewritten by the same script with nothing changed loads the same state,
  // so what rejects the others is their content, not the rewriting.
  const ChildResult control = in_child([&] {
    dest.load_checkpoint(out + "/rezipped_unchanged.ckpt");
    return first_tensor_difference(saved, snapshot(dest.parameters())) ? "Dother" : "Ssame";
  });
  ASSERT_FALSE(control.crashed) << control.how;
  ASSERT_EQ(control.verdict, 'S') << control.message;

  for (const char* name : {"global_os_system.ckpt", "global_builtins_eval.ckpt", "storage_short_data.ckpt",
                           "view_past_storage.ckpt"}) {
    const std::string path = out + "/" + name;
    const ChildResult r = in_child([&]() -> std::string {
      try {
        dest.load_checkpoint(path);
      } catch (const std::exception& e) {
        if (first_tensor_difference(dest_before, snapshot(dest.parameters()))) return std::string("T") + e.what();
        return std::string("R") + e.what();
      }
      return "Dloaded";
    });
    std::string first_line = r.message.substr(0, 400);
    for (char& ch : first_line) ch = ch == '\n' ? '|' : ch;
    std::cout << "[hostile] " << name << ": " << (r.crashed ? r.how : std::string(1, r.verdict) + " " + first_line)
              << "\n";
    ASSERT_FALSE(r.crashed) << name << ": " << r.how;
    EXPECT_EQ(r.verdict, 'R') << name << ": " << r.message;
    EXPECT_NE(r.message.find(path), std::string::npos) << r.message;
    // It got past our integrity check to LibTorch or to the bounds check.
    EXPECT_EQ(r.message.find("SHA-256"), std::string::npos) << r.message;
    EXPECT_EQ(r.message.find("first line"), std::string::npos) << r.message;
    EXPECT_FALSE(posix_fs::exists(canary)) << name << " ran its code: the canary file exists";
  }
}

// --- writes that cannot complete ------------------------------------------------------------------

// A checkpoint or report that cannot be written completely: the previous file stays byte for byte.
void expect_previous_kept(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& files) {
  for (const auto& [path, bytes] : files) EXPECT_EQ(read_bytes(path) == bytes, true) << path << " changed";
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(posix_fs::base_name(f.first));
  std::sort(names.begin(), names.end());
  EXPECT_EQ(list_dir(dir), names) << "a temporary file was left behind in " << dir;
}

TEST(FailedWrites, FileSizeLimitMidWriteKeepsThePreviousCheckpointAndReport) {
  Scratch dir;
  const std::string ckpt = dir.file("run.ckpt");
  const std::string report = dir.file("report.json");
  ref::ReferenceRun run;
  run.setup(RunOptions{});
  run.train_step();
  run.save_checkpoint(ckpt);
  const std::string prev_ckpt = read_bytes(ckpt);
  const std::string prev_report = "{\"the previous report\": true}\n";
  write_bytes(report, prev_report);
  // Half the checkpoint; the report (its environment alone is several kB) is larger than 1,500 bytes.
  const rlim_t ckpt_limit = prev_ckpt.size() / 2, report_limit = 1500;

  auto limited = [&](rlim_t limit, const std::function<std::string()>& fn) {
    return in_child([&, limit] {
      signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG instead of killing the process
      rlimit rl{limit, limit};
      if (setrlimit(RLIMIT_FSIZE, &rl) != 0) return std::string("Xsetrlimit failed");
      return fn();
    });
  };

  // Control: an in-place write under the same limit is cut short mid-file (the limit bites).
  const std::string torn = dir.file("torn.ckpt");
  const ChildResult c0 = limited(ckpt_limit, [&] {
    std::ofstream out(torn, std::ios::binary | std::ios::trunc);
    const std::string big = read_bytes(ckpt) + read_bytes(ckpt);
    out.write(big.data(), static_cast<std::streamsize>(big.size()));
    out.close();
    return std::string("R");
  });
  ASSERT_FALSE(c0.crashed) << c0.how;
  EXPECT_EQ(read_bytes(torn).size(), ckpt_limit) << "the file-size limit did not cut the write";
  posix_fs::remove_tree(torn);

  // The checkpoint save.
  const ChildResult c1 = limited(ckpt_limit, [&]() -> std::string {
    run.train_step();
    try {
      run.save_checkpoint(ckpt);
    } catch (const std::exception& e) {
      return std::string("R") + e.what();
    }
    return "Dsaved";
  });
  ASSERT_FALSE(c1.crashed) << c1.how;
  std::cout << "[writes] checkpoint over the file-size limit: " << c1.message << "\n";
  EXPECT_EQ(c1.verdict, 'R') << c1.message;
  EXPECT_NE(c1.message.find(ckpt), std::string::npos) << c1.message;
  EXPECT_NE(c1.message.find("File too large"), std::string::npos) << c1.message;

  // `torchconform run --json PATH`: the report is larger than the limit.
  const ChildResult c2 = limited(report_limit, [&] {
    std::string err;
    const int rc = cli({"torchconform", "run", "--in-process", "--check", "device_agnostic", "--recipe", "mixed_devices",
                        "--json", report, "--html", ""}, &err);
    return "R" + std::to_string(rc) + " " + err;
  });
  ASSERT_FALSE(c2.crashed) << c2.how;
  std::cout << "[writes] run --json over the file-size limit: exit " << c2.message << "\n";
  EXPECT_EQ(c2.message.rfind("2 ", 0), 0u) << "exit code not 2: " << c2.message;
  EXPECT_NE(c2.message.find("cannot write '" + report + "'"), std::string::npos) << c2.message;
  EXPECT_NE(c2.message.find("File too large"), std::string::npos) << c2.message;
  expect_previous_kept(dir.file(""), {{ckpt, prev_ckpt}, {report, prev_report}});
}

// Tests run as root in CI, and root writes into a directory whatever its mode. So the writing child
// drops to the unprivileged user `nobody` (uid/gid 65534) first, for whom a 0555 directory is
// really read-only: the write then fails with EACCES from the kernel, as it would for any user.
// (A read-only mount would be the other honest way; containers here cannot mount.)
std::string drop_privileges() {
  if (geteuid() != 0) return "";
  if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) return "cannot drop to nobody";
  if (geteuid() == 0 || setuid(0) == 0) return "still root after dropping privileges";
  return "";
}

TEST(FailedWrites, ReadOnlyDirectoryKeepsThePreviousCheckpointAndReport) {
  Scratch scratch;
  const std::string dir = scratch.file("readonly");
  posix_fs::make_dirs(dir);
  const std::string ckpt = dir + "/run.ckpt";
  const std::string report = dir + "/report.json";
  ref::ReferenceRun run;
  run.setup(RunOptions{});
  run.train_step();
  run.save_checkpoint(ckpt);
  const std::string prev_ckpt = read_bytes(ckpt);
  const std::string prev_report = "{\"the previous report\": true}\n";
  write_bytes(report, prev_report);
  const std::string writable = scratch.file("writable");
  posix_fs::make_dirs(writable);
  ASSERT_EQ(chmod(scratch.file("").c_str(), 0755), 0);
  ASSERT_EQ(chmod(writable.c_str(), 0777), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0555), 0);
  ASSERT_EQ(chmod(ckpt.c_str(), 0644), 0);

  const ChildResult r = in_child([&]() -> std::string {
    const std::string dropped = drop_privileges();
    if (!dropped.empty()) return "X" + dropped;
    // Control: the same user can write a checkpoint elsewhere, so what fails below is the directory.
    run.save_checkpoint(writable + "/ok.ckpt");
    std::string out;
    run.train_step();
    try {
      run.save_checkpoint(ckpt);
      out += "checkpoint saved; ";
    } catch (const std::exception& e) {
      out += std::string("checkpoint: ") + e.what() + "\n";
    }
    std::string err;
    const int rc = cli({"torchconform", "run", "--in-process", "--check", "device_agnostic", "--recipe", "mixed_devices",
                        "--json", report, "--html", ""}, &err);
    return "R" + std::to_string(rc) + " " + out + "run: " + err;
  });
  chmod(dir.c_str(), 0755);
  ASSERT_FALSE(r.crashed) << r.how;
  std::cout << "[writes] read-only directory: exit " << r.message << "\n";
  ASSERT_EQ(r.verdict, 'R') << r.message;
  EXPECT_TRUE(posix_fs::exists(writable + "/ok.ckpt")) << "the control write failed too";
  EXPECT_EQ(r.message.rfind("2 ", 0), 0u) << "run's exit code is not 2: " << r.message;
  EXPECT_NE(r.message.find("checkpoint: cannot write '" + ckpt + "'"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("cannot write '" + report + "'"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("Permission denied"), std::string::npos) << r.message;
  expect_previous_kept(dir, {{ckpt, prev_ckpt}, {report, prev_report}});
}

// --- fuzzing: seeds for ci/fuzz, and the crashers it found, replayed ----------------------------

// A real checkpoint (whole file, and its archive) and a real report, written where ci/fuzz asks
// (TC_FUZZ_SEED_DIR) or into scratch space; each must be accepted by its fuzz body, so that the
// fuzzers start from inputs that reach the end of the loader.
TEST(Fuzz, SeedsAreRealFilesTheFuzzBodiesAccept) {
  Scratch scratch;
  const char* env = std::getenv("TC_FUZZ_SEED_DIR");
  const std::string dir = env && *env ? env : scratch.file("seeds");
  for (const char* sub : {"/report", "/checkpoint", "/checkpoint_archive"}) posix_fs::make_dirs(dir + sub);
  ref::ReferenceRun run;
  run.setup(RunOptions{});
  run.train_step();
  run.save_checkpoint(dir + "/checkpoint/reference.ckpt");
  const std::string file = read_bytes(dir + "/checkpoint/reference.ckpt");
  const std::string body = file.substr(file.find('\n') + 1);
  write_bytes(dir + "/checkpoint_archive/reference.archive", body);
  const std::string report = dir + "/report/shapes-run.json";
  const ChildResult made = in_child([&] {
    std::string err;
    const int rc = cli({"torchconform", "run", "--in-process", "--check", "shapes", "--recipe", "reference,view_flatten",
                        "--quick", "--json", report, "--html", ""}, &err);
    return (rc == 0 ? "R" : "X") + err;
  });
  ASSERT_EQ(made.verdict, 'R') << made.how << made.message;
  const std::string gbench = read_bytes(std::string(tc::test_paths::source_dir()) + "/harness/tests/fixtures/gbench_base.json");
  write_bytes(dir + "/report/gbench_base.json", gbench);
  auto bytes = [](const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); };
  const std::string report_text = read_bytes(report);
  EXPECT_TRUE(fuzz::report_one(bytes(report_text), report_text.size()));
  EXPECT_TRUE(fuzz::report_one(bytes(gbench), gbench.size()));
  EXPECT_TRUE(fuzz::checkpoint_file_one(bytes(file), file.size()));
  EXPECT_TRUE(fuzz::checkpoint_archive_one(bytes(body), body.size()));
  // And they have teeth: a damaged input is refused by each.
  EXPECT_FALSE(fuzz::report_one(bytes(report_text), report_text.size() / 2));
  EXPECT_FALSE(fuzz::checkpoint_file_one(bytes(file), file.size() - 1));
  EXPECT_FALSE(fuzz::checkpoint_archive_one(bytes(body), body.size() / 2));
  std::cout << "[fuzz] seeds in " << dir << "\n";
}

TEST(Fuzz, CheckpointRegressionsReplay) {
  replay("reference/fuzz/regressions/checkpoint", &fuzz::checkpoint_file_one);
  replay("reference/fuzz/regressions/checkpoint_archive", &fuzz::checkpoint_archive_one);
}

}  // namespace
}  // namespace tc
