// Resilience: torchconform reads checkpoints and reports that may be corrupt or hostile, and
// writes files that may not complete.
//
// - Corruption corpus: 1,000 truncations and 1,000 single-bit flips of a real checkpoint and of a
//   real report, at positions drawn from a seeded RNG in named regions of each file. Every attempt
//   runs in a forked child (so a crash is counted, not fatal) and must be rejected with a message
//   naming the file, leave the destination model / the files already written as they were, and
//   never load other content.
// - Hostile checkpoints, made by reference/tests/make_hostile_checkpoints.py with their hash
//   recomputed so that they reach LibTorch: pickles calling os.system / builtins.eval, a storage
//   shorter than its tensor, a tensor whose storage offset puts its view past its storage (LibTorch
//   2.15 rejects that one itself). Rejected, the canary file never created, the model untouched.
// - Writes that cannot complete: a file-size limit hit mid-write, a read-only directory. A clear
//   error, non-zero exit, the previous checkpoint and report intact byte for byte.
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dirent.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <random>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "harness/cli.h"
#include "harness/fuzz/report_fuzz_body.h"
#include "harness/gbench_json.h"
#include "harness/util/posix_fs.h"
#include "harness/report_json.h"
#include "suites/support/tensor_compare.h"
#include "reference/checkpoint.h"
#include "reference/fuzz/checkpoint_fuzz_body.h"
#include "reference/reference_run.h"

namespace tc {
namespace {

using posix_fs::read_bytes;
using posix_fs::write_bytes;

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") out.push_back(n);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// What a forked child said (its first byte is a verdict letter), or how it died.
struct ChildResult {
  bool crashed = false;
  std::string how;  // "signal 11 (Segmentation fault)", "exit 3", ...
  char verdict = 0;
  std::string message;
};

// Runs fn in a forked child (60 s alarm): a crash or hang in it is reported, not fatal here.
ChildResult in_child(const std::function<std::string()>& fn) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    close(fds[0]);
    alarm(60);
    at::set_num_threads(1);  // the parent's OpenMP pool does not survive fork
    std::string out;
    try {
      out = fn();
    } catch (const std::exception& e) {
      out = std::string("X") + e.what();
    } catch (...) {
      out = "Xan exception that is not a std::exception";
    }
    size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = write(fds[1], out.data() + done, out.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  ChildResult r;
  if (WIFSIGNALED(status)) {
    r.crashed = true;
    r.how = "signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  } else if (WEXITSTATUS(status) != 0 || out.empty()) {
    r.crashed = true;
    r.how = "exit " + std::to_string(WEXITSTATUS(status)) + " without a verdict";
  } else {
    r.verdict = out[0];
    r.message = out.substr(1);
  }
  return r;
}

// Runs the command line in this process with stderr captured (for use inside a child).
int cli(std::vector<std::string> args, std::string* err = nullptr) {
  std::fflush(stderr);
  std::cerr.flush();
  FILE* tmp = std::tmpfile();
  const int saved = dup(2);
  if (tmp) dup2(fileno(tmp), 2);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int rc = cli_main(static_cast<int>(args.size()), argv.data());
  std::cerr.flush();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  if (tmp) {
    if (err) {
      std::rewind(tmp);
      char buf[4096];
      for (size_t n; (n = std::fread(buf, 1, sizeof buf, tmp)) > 0;) err->append(buf, n);
    }
    std::fclose(tmp);
  }
  return rc;
}

// --- the corruption plan -------------------------------------------------------------------------

struct Region {
  std::string name;
  size_t begin, end;  // [begin, end)
};

struct Corruption {
  bool truncate = false;  // else a bit flip
  std::string region;
  size_t at = 0;  // truncation: the new length; flip: the byte
  int bit = 0;
};

// n truncations and n flips, spread round-robin over the regions, positions from a seeded RNG.
std::vector<Corruption> plan_corruptions(const std::vector<Region>& regions, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Corruption> out;
  for (int kind = 0; kind < 2; ++kind) {
    for (int i = 0; i < n; ++i) {
      const Region& r = regions[static_cast<size_t>(i) % regions.size()];
      Corruption c;
      c.truncate = kind == 0;
      c.region = r.name;
      c.at = std::uniform_int_distribution<size_t>(r.begin, r.end - 1)(rng);
      c.bit = std::uniform_int_distribution<int>(0, 7)(rng);
      out.push_back(c);
    }
  }
  return out;
}

std::string apply(const std::string& good, const Corruption& c) {
  std::string bytes = good;
  if (c.truncate) {
    bytes.resize(c.at);
  } else {
    bytes[c.at] = static_cast<char>(bytes[c.at] ^ (1 << c.bit));
  }
  return bytes;
}

// Verdict letters from the children.
//   R rejected, everything as it was       T rejected, but something changed (model, files)
//   S loaded, the very content written     D loaded other content: a silent load
//   M rejected with a message that does not name the file
struct Tally {
  std::map<char, int> by_verdict;
  int crashed = 0;
  std::map<std::string, std::map<char, int>> by_region;
  std::vector<std::string> examples;  // the first few of each problem

  void add(const Corruption& c, const ChildResult& r) {
    const char v = r.crashed ? 'C' : r.verdict;
    if (r.crashed) ++crashed;
    ++by_verdict[v];
    ++by_region[std::string(c.truncate ? "truncate " : "flip ") + c.region][v];
    if (v != 'R' && v != 'S' && examples.size() < 10) {
      examples.push_back(std::string(c.truncate ? "truncated to " : "bit flipped at ") +
                         std::to_string(c.at) + " (" + c.region + "): " + std::string(1, v) + " " +
                         (r.crashed ? r.how : r.message.substr(0, 300)));
    }
  }
  int count(char v) const {
    auto it = by_verdict.find(v);
    return it == by_verdict.end() ? 0 : it->second;
  }
  void print(const std::string& what) const {
    int total = 0;
    for (const auto& kv : by_verdict) total += kv.second;
    std::cout << "[corpus] " << what << ": " << total << " corrupt files: rejected " << count('R')
              << ", crashed " << crashed << ", silently loaded (other content) " << count('D')
              << ", loaded the very content written " << count('S')
              << ", rejected but changed something " << count('T')
              << ", rejected without naming the file " << count('M')
              << ", other " << count('X') << "\n";
    for (const auto& [region, m] : by_region) {
      std::cout << "[corpus]   " << region << ":";
      for (const auto& [v, n] : m) std::cout << " " << v << "=" << n;
      std::cout << "\n";
    }
    for (const std::string& e : examples) std::cout << "[corpus]   e.g. " << e << "\n";
  }
};

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

// Regions of a report file: its start, the "sha256" line, the rest of the body, its last 64 bytes.
std::vector<Region> report_regions(const std::string& file) {
  const size_t key = file.find("\"sha256\"");
  if (key == std::string::npos || file.size() < 256) throw std::runtime_error("report without sha256");
  const size_t line_begin = file.rfind('\n', key) + 1;
  const size_t line_end = file.find('\n', key) + 1;
  return {{"start", 0, 64},
          {"sha256 line", line_begin, line_end},
          {"body", 64, file.size() - 64},
          {"last 64 bytes", file.size() - 64, file.size()}};
}

constexpr int kCorruptions = 1000;  // of each kind, truncations and bit flips

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
  ScratchDir dir;
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
  Tally tally;
  for (const Corruption& c : plan_corruptions(regions, kCorruptions, 20261129)) {
    write_bytes(bad, apply(good, c));
    const ChildResult r = in_child([&]() -> std::string {
      try {
        dest.load_checkpoint(bad);
      } catch (const std::exception& e) {
        const std::string msg = e.what();
        if (first_tensor_difference(dest_before, snapshot(dest.parameters()))) return "T" + msg;
        if (msg.find(bad) == std::string::npos) return "M" + msg;
        return "R" + msg;
      }
      return first_tensor_difference(saved, snapshot(dest.parameters())) ? "Dloaded other state" : "Sloaded";
    });
    tally.add(c, r);
  }
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

// --- reports --------------------------------------------------------------------------------------

TEST(CorruptionCorpus, EveryCorruptReportIsRejectedAndNothingWrittenIsLost) {
  ScratchDir dir;
  const std::string good_path = dir.file("good.json");
  // A real report: a quick run of a check on the reference and the variant it catches.
  const ChildResult made = in_child([&] {
    std::string err;
    const int rc = cli({"torchconform", "run", "--check", "shapes", "--recipe", "reference,view_flatten",
                        "--quick", "--json", good_path, "--html", ""}, &err);
    return (rc == 0 ? "R" : "X") + err;
  });
  ASSERT_FALSE(made.crashed) << made.how;
  ASSERT_EQ(made.verdict, 'R') << made.message;
  const std::string good = read_bytes(good_path);
  const nlohmann::json original = report_to_json(read_report_file(good_path));
  ASSERT_EQ(original["cells"].size(), 2u);

  // Files already written that a failed command must leave alone.
  const std::string prev_html = dir.file("previous.html");
  const std::string prev_compare = dir.file("previous-compare.html");
  write_bytes(prev_html, "<p>the previous report page</p>\n");
  write_bytes(prev_compare, "<p>the previous comparison page</p>\n");

  const std::vector<Region> regions = report_regions(good);
  const std::string bad = dir.file("bad.json");
  Tally tally;
  for (const Corruption& c : plan_corruptions(regions, kCorruptions, 20261130)) {
    const std::string bytes = apply(good, c);
    write_bytes(bad, bytes);
    const ChildResult r = in_child([&]() -> std::string {
      std::string msg;
      int loaded = 0;
      nlohmann::json got;
      try {
        got = report_to_json(read_report_file(bad));  // what `report` and `bench --json` read
        ++loaded;
      } catch (const ReportFormatError& e) {
        msg = e.what();
      }
      try {
        Report again = read_comparable_file(bad);  // what `compare` and `trend` read
        ++loaded;
        if (got.is_null()) got = report_to_json(again);
      } catch (const ReportFormatError& e) {
        if (msg.empty()) msg = e.what();
      }
      if (loaded == 2) return got == original ? "Sloaded the content written" : "Dloaded other content";
      if (loaded == 1) return "Dthe two readers disagree: " + msg;
      // The commands that read it: exit 2, and nothing they could have written is touched.
      const int rc_report = cli({"torchconform", "report", bad, "--html", prev_html});
      const int rc_bench = cli({"torchconform", "bench", "--json", bad, "--benchmark_filter=^none$"});
      const int rc_compare = cli({"torchconform", "compare", bad, good_path, "--html", prev_compare});
      const int rc_trend = cli({"torchconform", "trend", good_path, bad, "--html", prev_compare});
      if (rc_report != 2 || rc_bench != 2 || rc_compare != 2 || rc_trend != 2) {
        return "Texit codes report " + std::to_string(rc_report) + ", bench " + std::to_string(rc_bench) +
               ", compare " + std::to_string(rc_compare) + ", trend " + std::to_string(rc_trend) + ": " + msg;
      }
      if (read_bytes(bad) != bytes || read_bytes(good_path) != good ||
          read_bytes(prev_html) != "<p>the previous report page</p>\n" ||
          read_bytes(prev_compare) != "<p>the previous comparison page</p>\n") {
        return "Ta file already written changed: " + msg;
      }
      if (msg.find(bad) == std::string::npos) return "M" + msg;
      return "R" + msg;
    });
    tally.add(c, r);
  }
  std::cout << "[corpus] report: " << good.size() << " bytes; regions:";
  for (const Region& r : regions) std::cout << " " << r.name << " [" << r.begin << ", " << r.end << ")";
  std::cout << "\n";
  tally.print("report");
  EXPECT_EQ(tally.crashed, 0);
  EXPECT_EQ(tally.count('D'), 0);
  EXPECT_EQ(tally.count('T'), 0);
  EXPECT_EQ(tally.count('M'), 0);
  EXPECT_EQ(tally.count('X'), 0);
  EXPECT_EQ(tally.count('R') + tally.count('S'), 2 * kCorruptions);
  EXPECT_EQ(list_dir(dir.file("")), (std::vector<std::string>{"bad.json", "good.json", "previous-compare.html",
                                                                "previous.html"}))
      << "a temporary file was left behind";
}

// A document nested far deeper than any report: rejected by the depth limit, not a stack overflow
// in the recursive copy, dump or destruction of the parsed value.
TEST(CorruptionCorpus, DeeplyNestedReportIsRejected) {
  ScratchDir dir;
  const std::string path = dir.file("deep.json");
  const int depth = 1000000;
  write_bytes(path, "{\"schema\":\"torchconform.report/1\",\"sha256\":\"0\",\"run\":" + std::string(depth, '[') +
                        std::string(depth, ']') + "}");
  const ChildResult r = in_child([&]() -> std::string {
    try {
      read_report_file(path);
    } catch (const ReportFormatError& e) {
      return std::string("R") + e.what();
    }
    return "Dloaded";
  });
  ASSERT_FALSE(r.crashed) << r.how;
  EXPECT_EQ(r.verdict, 'R') << r.message;
  EXPECT_NE(r.message.find("nested deeper than"), std::string::npos) << r.message;
}

// --- hostile checkpoints --------------------------------------------------------------------------

TEST(HostileCheckpoint, PicklesThatRunCodeAndShortStoragesAreRejectedWithNoSideEffect) {
  ScratchDir dir;
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
  const std::string cmd = std::string(TC_TEST_PYTHON) + " " + TC_SOURCE_DIR +
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
  ScratchDir dir;
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
    const int rc = cli({"torchconform", "run", "--check", "torch_compile", "--recipe", "reference",
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
  ScratchDir scratch;
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
    const int rc = cli({"torchconform", "run", "--check", "torch_compile", "--recipe", "reference",
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
  ScratchDir scratch;
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
    const int rc = cli({"torchconform", "run", "--check", "shapes", "--recipe", "reference,view_flatten",
                        "--quick", "--json", report, "--html", ""}, &err);
    return (rc == 0 ? "R" : "X") + err;
  });
  ASSERT_EQ(made.verdict, 'R') << made.how << made.message;
  const std::string gbench = read_bytes(std::string(TC_SOURCE_DIR) + "/harness/tests/fixtures/gbench_base.json");
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

// Every input committed under the fuzzers' regressions/ folders (crashers they found, and inputs
// found by review) runs through the same body as the fuzzer, in a child: no crash, no escape of an
// exception the contract does not allow.
void replay(const std::string& folder, bool (*body)(const uint8_t*, size_t)) {
  const std::string dir = std::string(TC_SOURCE_DIR) + "/" + folder;
  int n = 0;
  for (const std::string& name : list_dir(dir)) {
    if (name == "README.md") continue;
    const std::string input = read_bytes(dir + "/" + name);
    const ChildResult r = in_child([&] {
      const bool ok = body(reinterpret_cast<const uint8_t*>(input.data()), input.size());
      return std::string(ok ? "Saccepted" : "Rrejected");
    });
    ++n;
    EXPECT_FALSE(r.crashed) << folder << "/" << name << ": " << r.how;
    EXPECT_NE(r.verdict, 'X') << folder << "/" << name << ": " << r.message;
    std::cout << "[fuzz] " << folder << "/" << name << ": " << (r.crashed ? r.how : r.message) << "\n";
  }
  std::cout << "[fuzz] " << folder << ": " << n << " inputs replayed\n";
}

TEST(Fuzz, ReportRegressionsReplay) { replay("harness/fuzz/regressions/report", &fuzz::report_one); }
TEST(Fuzz, CheckpointRegressionsReplay) {
  replay("reference/fuzz/regressions/checkpoint", &fuzz::checkpoint_file_one);
  replay("reference/fuzz/regressions/checkpoint_archive", &fuzz::checkpoint_archive_one);
}

}  // namespace
}  // namespace tc
