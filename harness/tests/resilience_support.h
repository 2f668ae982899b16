// Shared by the resilience tests of the report readers (harness/tests/report_resilience_test.cpp)
// and of the checkpoint loader (reference/tests/checkpoint_resilience_test.cpp): a fork-isolated
// child that reports a verdict letter (a crash or hang in it is counted, not fatal), the command
// line run in-process, and the corruption plan (truncations and bit flips in named regions of a
// file, from a seeded RNG) with its tally. Tests only; the including target links tc_test_paths.
#pragma once

#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include "harness/cli.h"
#include "harness/util/posix_fs.h"
#include "harness/testing/test_paths.h"

namespace tc {
namespace resilience {

inline std::vector<std::string> list_dir(const std::string& dir) {
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

// Runs attempts 0..n-1 of fn in forked children, many in one child: a child goes on to its next
// attempt only after one whose verdict letter is in `go_on` (the attempt itself checked that it left
// everything as it was: the model, the files), at most `per_child` of them; a fresh child takes the
// next attempt otherwise. A crash or hang (60 s an attempt) is counted against the attempt it
// happened in, its `how` naming the attempts that child ran before it. A fork costs about 8-10 ms of
// system time here (copying the page tables of a process that holds LibTorch: the checkpoint
// corpus's 2,000 attempts, each with its own fork and then the loader's, took 38 s of system time of
// a 40 s test); what an attempt sees is the same either way, since every attempt the child went on
// from changed nothing.
inline std::vector<ChildResult> in_children(size_t n, const std::function<std::string(size_t)>& fn,
                                            const std::string& go_on, size_t per_child = 100) {
  std::vector<ChildResult> results;
  results.reserve(n);
  while (results.size() < n) {
    const size_t first = results.size();
    const size_t last = std::min(n, first + per_child);
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
    std::cout.flush();
    std::cerr.flush();
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      close(fds[0]);
      at::set_num_threads(1);  // the parent's OpenMP pool does not survive fork
      for (size_t i = first; i < last; ++i) {
        alarm(60);
        std::string out;
        try {
          out = fn(i);
        } catch (const std::exception& e) {
          out = std::string("X") + e.what();
        } catch (...) {
          out = "Xan exception that is not a std::exception";
        }
        const uint32_t len = static_cast<uint32_t>(out.size());
        std::string frame(reinterpret_cast<const char*>(&len), sizeof len);
        frame += out;
        size_t done = 0;
        while (done < frame.size()) {
          const ssize_t w = write(fds[1], frame.data() + done, frame.size() - done);
          if (w <= 0) _exit(3);
          done += static_cast<size_t>(w);
        }
        if (out.empty() || go_on.find(out[0]) == std::string::npos) break;
      }
      _exit(0);
    }
    close(fds[1]);
    std::string bytes;
    char buf[65536];
    for (ssize_t r; (r = read(fds[0], buf, sizeof buf)) > 0;) bytes.append(buf, static_cast<size_t>(r));
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    size_t at = 0;
    while (at + sizeof(uint32_t) <= bytes.size()) {
      uint32_t len = 0;
      std::memcpy(&len, bytes.data() + at, sizeof len);
      if (at + sizeof len + len > bytes.size()) break;  // a frame cut short: the child died writing it
      const std::string out = bytes.substr(at + sizeof len, len);
      at += sizeof len + len;
      ChildResult r;
      if (out.empty()) {
        r.crashed = true;
        r.how = "an attempt without a verdict";
      } else {
        r.verdict = out[0];
        r.message = out.substr(1);
      }
      results.push_back(r);
    }
    const bool clean_exit = WIFEXITED(status) && WEXITSTATUS(status) == 0 && at == bytes.size();
    if (!clean_exit || results.size() == first) {
      ChildResult r;
      r.crashed = true;
      r.how = WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")"
                                  : "exit " + std::to_string(WEXITSTATUS(status)) + " without a verdict";
      if (results.size() == last) {  // it died after its last verdict: counted against that attempt
        r.how += " after its verdict (the child's attempt " + std::to_string(last - first) + ")";
        results.back() = r;
      } else {
        r.how += " (the child's attempt " + std::to_string(results.size() - first + 1) + ")";
        results.push_back(r);
      }
    }
  }
  return results;
}

// Runs fn in a forked child (60 s alarm): a crash or hang in it is reported, not fatal here.
inline ChildResult in_child(const std::function<std::string()>& fn) {
  return in_children(1, [&](size_t) { return fn(); }, "")[0];
}

// Runs the command line in this process with stderr captured (for use inside a child).
inline int cli(std::vector<std::string> args, std::string* err = nullptr) {
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
inline std::vector<Corruption> plan_corruptions(const std::vector<Region>& regions, int n, uint64_t seed) {
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

inline std::string apply(const std::string& good, const Corruption& c) {
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


constexpr int kCorruptions = 1000;  // of each kind, truncations and bit flips

// --- fuzz regressions -----------------------------------------------------------------------------

// Every input committed under the fuzzers' regressions/ folders (crashers they found, and inputs
// found by review) runs through the same body as the fuzzer, in a child: no crash, no escape of an
// exception the contract does not allow.
// The verdict each input of a regressions folder must get, from its EXPECTED file: lines
// "<input> accepted|rejected" ('#' starts a comment).
inline std::map<std::string, std::string> expected_verdicts(const std::string& dir) {
  std::map<std::string, std::string> out;
  std::istringstream lines(posix_fs::read_bytes(dir + "/EXPECTED"));
  std::string line;
  while (std::getline(lines, line)) {
    line = line.substr(0, line.find('#'));
    std::istringstream fields(line);
    std::string name, verdict, extra;
    if (!(fields >> name)) continue;
    fields >> verdict;
    EXPECT_TRUE((verdict == "accepted" || verdict == "rejected") && !(fields >> extra))
        << dir << "/EXPECTED: '" << line << "' is not '<input> accepted|rejected'";
    out[name] = verdict;
  }
  return out;
}

// Replays every input of a regressions folder through a fuzz body, each in a child: none may
// crash, each must get the verdict EXPECTED names, and the folder must hold at least one input.
inline void replay(const std::string& folder, bool (*body)(const uint8_t*, size_t)) {
  const std::string dir = std::string(tc::test_paths::source_dir()) + "/" + folder;
  std::map<std::string, std::string> expected = expected_verdicts(dir);
  int n = 0;
  for (const std::string& name : list_dir(dir)) {
    if (name == "README.md" || name == "EXPECTED") continue;
    const std::string input = posix_fs::read_bytes(dir + "/" + name);
    const ChildResult r = in_child([&] {
      const bool ok = body(reinterpret_cast<const uint8_t*>(input.data()), input.size());
      return std::string(ok ? "Saccepted" : "Rrejected");
    });
    ++n;
    EXPECT_FALSE(r.crashed) << folder << "/" << name << ": " << r.how;
    EXPECT_NE(r.verdict, 'X') << folder << "/" << name << ": " << r.message;
    auto want = expected.find(name);
    if (want == expected.end()) {
      ADD_FAILURE() << folder << "/" << name << ": no line in EXPECTED (accepted or rejected?)";
    } else {
      EXPECT_EQ(r.message, want->second) << folder << "/" << name;
      expected.erase(want);
    }
    std::cout << "[fuzz] " << folder << "/" << name << ": " << (r.crashed ? r.how : r.message) << "\n";
  }
  for (const auto& [name, verdict] : expected) ADD_FAILURE() << folder << "/EXPECTED names '" << name << "', not there";
  EXPECT_GT(n, 0) << folder << " holds no input: the replay would check nothing";
  std::cout << "[fuzz] " << folder << ": " << n << " inputs replayed\n";
}

}  // namespace resilience
}  // namespace tc
