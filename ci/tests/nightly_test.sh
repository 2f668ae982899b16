#!/usr/bin/env bash
# Test of ci/nightly on a tiny matrix, against a build that already exists (no set-up, no build):
#
#   ci/tests/nightly_test.sh BIN_DIR        BIN_DIR holds torchconform (e.g. build/)
#
#   0. TC_NIGHTLY_BIN names no binary: exit 2, nothing written.
# Then four nightly runs into a temporary history folder with a temporary baselines folder, each on
# `run --device cpu --check eval_mode --recipe reference,no_eval` and the reference/train_step
# benchmark (5 short repetitions):
#   1. no baseline yet: the run becomes it; exit 0; report.json/.html, trend.html and `latest`;
#   2. gated against that baseline: compare PASS, trend PASS, exit 0;
#   3. with TORCHCONFORM_BENCH_SLOWDOWN_MS=300 (each step, 2-7 ms here, gets 300 ms of CPU work
#      more): compare calls reference/train_step a REGRESSION; the trend (3 runs, too few)
#      passes; exit 1;
#   4. slowed again, compare's threshold out of reach, the trend's window 1 (3 earlier runs):
#      compare passes, the trend calls it a regression; exit 1.
# Each gate is thus shown to fail the nightly on its own. Made to pass on a loaded machine: compare
# and the trend gate at 600% (7x) here, and the slowdown makes the step 40-100x slower: a false
# pass in run 2 needs a run 7x slower than the baseline's, a miss in run 3 a baseline step over
# 40 ms; under a load of 6 on 2 cores the step read 7 ms (quiet: 2-5 ms). 5 repetitions a side:
# compare's Mann-Whitney test cannot be significant with fewer than 4 + 4 samples.
# Exit 0 when every assertion held, 1 otherwise (each failed one printed: expected and seen);
# the temporary folder is kept on failure. About 35-50 s.
set -uo pipefail

if [ $# -ne 1 ] || [ ! -x "$1/torchconform" ]; then
  echo "usage: $0 BIN_DIR   (BIN_DIR/torchconform must exist)" >&2
  exit 2
fi
BIN=$(cd "$1" && pwd)/torchconform
NIGHTLY=$(cd "$(dirname "$0")/.." && pwd)/nightly
PY=${PYTHON:-python3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tc-nightly-test.XXXXXX")
HIST=$WORK/history
BASE=$WORK/baselines
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# expect_rc WHAT WANT SEEN
expect_rc() {
  if [ "$3" != "$2" ]; then
    fail "$1: expected exit $2, got $3 (the log's last lines:)"
    tail -n 25 "$WORK/$1.log" | sed 's/^/    | /'
  fi
}
# expect_file WHAT PATH
expect_file() { [ -s "$2" ] || fail "$1: expected a non-empty ${2#"$WORK"/}, there is none"; }
# expect_line WHAT FILE REGEX: a line of FILE matches the extended REGEX
expect_line() {
  if ! grep -qE -- "$3" "$2" 2>/dev/null; then
    fail "$1: expected a line matching /$3/ in ${2#"$WORK"/}; it has none (its last lines:)"
    tail -n 15 "$2" 2>/dev/null | sed 's/^/    | /'
  fi
}
latest() { readlink "$HIST/latest" 2>/dev/null || echo "(no latest link)"; }
# new_folder NAME PREVIOUS FILE...: `latest` names a new folder (not PREVIOUS) holding FILE...;
# sets R to it. Returns 1 when there is no such folder (the caller skips what reads it).
new_folder() {
  local name=$1 prev=$2 f
  shift 2
  R=$(latest)
  if [ "$R" = "$prev" ] || [ ! -d "$HIST/$R" ]; then
    fail "$name: expected history/latest to point at a new run folder, it is '$R' (before: '$prev')"
    return 1
  fi
  for f in "$@"; do expect_file "$name" "$HIST/$R/$f"; done
  return 0
}

# nightly NAME [VAR=VALUE...]: one ci/nightly run (VAR=VALUE after the defaults, so they win); its
# output in $WORK/NAME.log, its exit in RC.
nightly() {
  local name=$1
  shift
  local t0=$SECONDS
  ( cd "$WORK" && env -u TORCHCONFORM_BENCH_SLOWDOWN_MS \
      TC_NIGHTLY_BIN="$BIN" TC_HISTORY_DIR="$HIST" TC_BASELINE_DIR="$BASE" TC_NIGHTLY_GENERATED_DRAWS=0 \
      TC_NIGHTLY_RUN_ARGS="--device cpu --check eval_mode --recipe reference,no_eval" \
      TC_NIGHTLY_COMPARE_ARGS="--threshold 600%" TC_NIGHTLY_TREND_ARGS="--threshold 600%" "$@" \
      "$NIGHTLY" --benchmark_filter=reference/train_step --benchmark_min_time=0.05 --benchmark_repetitions=5
  ) >"$WORK/$name.log" 2>&1
  RC=$?
  echo "$name: exit $RC in $((SECONDS - t0)) s, latest -> $(latest)"
  # What the gates saw (for a reader of a failure): compare's and the trend's benchmark lines.
  grep -hE "^ *reference/train_step " "$HIST/$(latest)/compare.txt" 2>/dev/null | sed 's/^ */    compare: /'
  grep -hE "^ *reference/train_step \[" "$WORK/$name.log" | sed 's/^ */    trend:   /'
}

# ---- 0. a TC_NIGHTLY_BIN that is not there: set-up error, exit 2, nothing written
env TC_NIGHTLY_BIN="$WORK/no-such-binary" TC_HISTORY_DIR="$HIST" TC_BASELINE_DIR="$BASE" "$NIGHTLY" >"$WORK/run0.log" 2>&1
RC=$?
echo "run0: exit $RC"
expect_rc run0 2 "$RC"
expect_line run0 "$WORK/run0.log" "TC_NIGHTLY_BIN='.*/no-such-binary' is not an executable file"
[ ! -e "$HIST" ] && [ ! -e "$BASE" ] || fail "run0: expected no history or baselines folder, found: $(ls "$WORK")"

# ---- 1. first run: no baseline, so this run becomes it
nightly run1
expect_rc run1 0 "$RC"
new_folder run1 "" report.json report.html trend.html && R1=$R || R1=""
[ ! -e "$HIST/$R1/compare.txt" ] || fail "run1: expected no compare.txt (no baseline to compare with), there is one"
expect_line run1 "$WORK/run1.log" "no baseline for machine '[a-z0-9-]+': creating .*/baselines/[a-z0-9-]+\.json"
expect_line run1 "$WORK/run1.log" "run exit 0, bench 0, compare 0, trend 0"
expect_line run1 "$WORK/run1.log" "nightly gate: PASS"
mapfile -t baselines < <(ls "$BASE"/*.json 2>/dev/null)
BASELINE=${baselines[0]:-$BASE/none.json}
if [ "${#baselines[@]}" != 1 ]; then
  fail "run1: expected one baseline in baselines/, found ${#baselines[@]}: ${baselines[*]:-none}"
elif [ -n "$R1" ] && ! cmp -s "$BASELINE" "$HIST/$R1/report.json"; then
  fail "run1: expected the baseline to be a copy of run1's report.json, it differs"
fi
# The report: only the cells TC_NIGHTLY_RUN_ARGS asked for, and the benchmark with its 5 repetitions.
if [ -n "$R1" ] && ! out=$("$PY" - "$HIST/$R1/report.json" 2>&1 <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
cells = sorted((c["check"], c["recipe"], c["device"], c["verdict"]) for c in r["cells"])
want = [("eval_mode", "no_eval", "cpu", "ok"), ("eval_mode", "reference", "cpu", "ok")]
problems = []
if cells != want:
    problems.append("cells: expected %s, seen %s" % (want, cells))
benches = [(b["name"], len(b["samples"])) for b in r["benchmarks"]]
if benches != [("reference/train_step", 5)]:
    problems.append("benchmarks (name, samples): expected [('reference/train_step', 5)], seen %s" % benches)
print("\n".join(problems))
sys.exit(1 if problems else 0)
PYEOF
); then
  fail "run1: report.json: $out"
fi
baseline_kept() { [ -z "$R1" ] || cmp -s "$BASELINE" "$HIST/$R1/report.json" || fail "$1: expected the baseline unchanged (run1's report), it changed"; }

# ---- 2. second run: gated against the baseline, same build, no change
nightly run2
expect_rc run2 0 "$RC"
if new_folder run2 "$R1" report.json report.html compare.txt compare.html trend.html; then
  expect_line run2 "$HIST/$R/compare.txt" "reference/train_step"
  expect_line run2 "$HIST/$R/compare.txt" "gate: PASS"
fi
R2=$R
expect_line run2 "$WORK/run2.log" "comparing against .*/baselines/"
expect_line run2 "$WORK/run2.log" "run exit 0, bench 0, compare 0, trend 0"
expect_line run2 "$WORK/run2.log" "nightly gate: PASS"
baseline_kept run2

# ---- 3. every step 300 ms slower: compare's regression alone fails the nightly (3 runs: no trend)
nightly run3 TORCHCONFORM_BENCH_SLOWDOWN_MS=300
expect_rc run3 1 "$RC"
if new_folder run3 "$R2" report.json compare.txt compare.html trend.html; then
  expect_line run3 "$HIST/$R/compare.txt" "reference/train_step.*REGRESSION"
  expect_line run3 "$HIST/$R/compare.txt" "gate: FAIL"
fi
R3=$R
expect_line run3 "$WORK/run3.log" "reference/train_step \\[cpu, ms\\]: short_history"
expect_line run3 "$WORK/run3.log" "run exit 0, bench 0, compare 1, trend 0"
expect_line run3 "$WORK/run3.log" "nightly gate: FAIL"
baseline_kept run3

# ---- 4. slowed again, compare's threshold out of reach: the trend's regression alone fails it
nightly run4 TORCHCONFORM_BENCH_SLOWDOWN_MS=300 TC_NIGHTLY_COMPARE_ARGS="--threshold 100000%" \
  TC_NIGHTLY_TREND_ARGS="--window 1 --threshold 600%"
expect_rc run4 1 "$RC"
if new_folder run4 "$R3" report.json compare.txt trend.html; then
  expect_line run4 "$HIST/$R/compare.txt" "gate: PASS"
fi
expect_line run4 "$WORK/run4.log" "torchconform trend: 4 run\\(s\\)"
expect_line run4 "$WORK/run4.log" "reference/train_step \\[cpu, ms\\]: regression"
expect_line run4 "$WORK/run4.log" "trend gate: FAIL"
expect_line run4 "$WORK/run4.log" "run exit 0, bench 0, compare 0, trend 1"
expect_line run4 "$WORK/run4.log" "nightly gate: FAIL"
baseline_kept run4

if [ "$failures" -gt 0 ]; then
  echo "nightly_test: $failures assertion(s) failed; logs and history kept in $WORK"
  exit 1
fi
rm -rf "$WORK"
echo "nightly_test: PASS (4 runs: baseline created, gate passed, compare and trend each caught the slowdown)"
