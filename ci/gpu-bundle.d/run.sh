#!/usr/bin/env bash
# torchconform GPU bundle: every CUDA cell, the CUDA benchmarks and the NCCL paths in one command.
#
#   run.sh [--quick] OUTDIR
#
# Needs only this folder (made by ci/gpu-bundle on the CPU machine) and a `python3` on PATH whose
# torch is the one in MANIFEST.json (LibTorch and its CUDA libraries are that torch's). Steps, each
# with its own time limit (whole run <= 8 min, --quick <= 3 min):
#   preflight   bundle intact (sha256), torch + CUDA version as in the manifest, glibc new enough,
#               every binary resolves every library (ldd), nvidia-smi and the environment recorded
#   run:<check> `torchconform run --device cuda --check <check> --recipe <the reference and the
#               variants it must catch>`, one process per check, so that a slow or hung check costs
#               its own limit only; the distributed check runs NCCL at world size = the number of
#               GPUs (torchrun from this python3)
#   run:<check>:rest  then, while time is left, every other recipe on each check (recorded cells)
#   run:report  the per-check reports as run.json (merged after every part), rendered as run.html
#   bench:cuda  the CUDA benchmarks (AMP train steps, matmul ceiling, host-to-device copies), then
#   bench:loader  the loader benchmark, merged into the same bench.json
#   allreduce   tc_allreduce_bench under torchrun with NCCL, one rank per GPU -> allreduce.json
# OUTDIR gets at most 7 files: summary.txt (read it first), environment.txt, steps.log, run.json,
# run.html, bench.json, allreduce.json. summary.txt is rewritten before and after every step, so
# an interrupted run still names the step it was in; earlier steps' files stay.
#
# Exit: 0 every step ran and no cell is missed / false_alarm / error; 1 a step failed or ran out of
# time, or a cell is not ok; 2 refused (bad usage, bundle damaged, torch or CUDA version differs from
# the manifest, glibc too old, a library not found, no CUDA device); 130 / 143 interrupted.
#
# Test hook (never a GPU result): TC_BUNDLE_TEST_DEVICE=cpu runs the same steps on the CPU, the
# all-reduce with Gloo on 2 ranks, to test this script on a machine without a GPU.
set -uo pipefail

BUNDLE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN=$BUNDLE/bin
DEVICE=${TC_BUNDLE_TEST_DEVICE:-cuda}
case "$DEVICE" in cuda|cpu) ;; *) echo "run.sh: TC_BUNDLE_TEST_DEVICE is cpu or unset" >&2; exit 2 ;; esac

usage() { sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&"${1:-1}"; }
quick=0
outdir=""
for a in "$@"; do
  case "$a" in
    --quick) quick=1 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "run.sh: unknown option $a" >&2; usage 2; exit 2 ;;
    *) if [ -n "$outdir" ]; then echo "run.sh: one OUTDIR only" >&2; exit 2; fi; outdir=$a ;;
  esac
done
if [ -z "$outdir" ]; then echo "run.sh: OUTDIR missing" >&2; usage 2; exit 2; fi
if ! command -v python3 >/dev/null; then echo "run.sh: refused: no python3 on PATH (it must hold torch)" >&2; exit 2; fi
mkdir -p "$outdir" || exit 2
OUT=$(cd "$outdir" && pwd)
for f in summary.txt environment.txt steps.log run.json run.html bench.json allreduce.json; do rm -f "$OUT/$f"; done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tc-gpu-bundle.XXXXXX") || exit 2
STATE=$WORK/state
mkdir -p "$STATE" "$WORK/cwd" "$WORK/parts"
# Every process a step starts carries this in its environment, so that what a timed-out or
# interrupted step leaves behind (torchrun's workers live in sessions of their own) can be found.
MARKER="TC_GPU_BUNDLE_RUN=$$.$RANDOM$RANDOM"

# Time: the whole run's deadline, and the nominal limit of each phase (shrunk to fit the deadline).
T0=$SECONDS
if [ "$quick" = 1 ]; then
  TOTAL=180 RUN_B=100 BENCH_B=40 AR_B=20 CHECK_CAP=30 FLOOR=4 RESERVE=5
else
  TOTAL=480 RUN_B=280 BENCH_B=110 AR_B=60 CHECK_CAP=90 FLOOR=6 RESERVE=10
fi
echo "$([ "$quick" = 1 ] && echo quick || echo full) $TOTAL" >"$STATE/mode"
: >"$STATE/steps.tsv"

log() { printf '[run.sh %3ds] %s\n' "$((SECONDS - T0))" "$*" >&2; }
py() { python3 -B "$BUNDLE/bundle.py" "$@"; }
summary() { py summary "$OUT" "$STATE" "$BUNDLE" || log "could not write summary.txt"; }
# The seconds left for a phase: its nominal limit, or less so that the later phases' nominal limits
# and the final reserve still fit before the deadline.
limit_for() {
  local nominal=$1 later=$2
  local left=$((T0 + TOTAL - SECONDS - later - RESERVE))
  [ "$left" -lt "$nominal" ] && nominal=$left
  echo "$nominal"
}
record_step() {  # name status wall budget rc note
  local note=${6//$'\t'/ }
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "${note//$'\n'/ | }" >>"$STATE/steps.tsv"
}
finish() {  # exit_code verdict
  rm -f "$STATE/current"
  echo "$2" >"$STATE/verdict"
  summary
  log "$2"
  log "results in $OUT (summary.txt first)"
  rm -rf "$WORK"
  exit "$1"
}
refuse() {
  echo "run.sh: refused: $*" >&2
  record_step preflight refused "$((SECONDS - T0))" - 2 "$*"
  finish 2 "REFUSED (exit 2): $*"
}
append_log() {  # name file: into steps.log, at most ~400 KB per step
  local size
  { printf '\n===== %s =====\n' "$1"
    size=$(stat -c %s "$2" 2>/dev/null || echo 0)
    if [ "$size" -gt 400000 ]; then
      head -c 100000 "$2"; printf '\n[... %d bytes left out ...]\n' "$((size - 400000))"; tail -c 300000 "$2"
    else
      cat "$2" 2>/dev/null
    fi
  } >>"$OUT/steps.log"
}

current_name=""
current_start=0
on_signal() {
  local sig=$1
  trap - INT TERM HUP
  [ -n "$current_name" ] && py sweep "$MARKER" >&2
  if [ -n "$current_name" ]; then
    record_step "$current_name" interrupted "$((SECONDS - current_start))" - - "run.sh got SIG$sig"
    [ -f "$WORK/step.log" ] && append_log "$current_name (interrupted)" "$WORK/step.log"
  fi
  finish $((128 + $([ "$sig" = INT ] && echo 2 || { [ "$sig" = HUP ] && echo 1 || echo 15; }))) \
    "INTERRUPTED by SIG$sig during step '${current_name:-between steps}'; the files of the steps before it are kept"
}
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM
trap 'on_signal HUP' HUP

# run_step NAME LIMIT CMD...: runs CMD (cwd $WORK/cwd, the step's environment) under `timeout`,
# in the background so that a signal to run.sh is handled at once; sets STEP_RC and STEP_STATUS.
run_step() {
  local name=$1 limit=$2
  shift 2
  current_name=$name
  current_start=$SECONDS
  printf '%s\t%s\n' "$name" "$((SECONDS - T0))" >"$STATE/current"
  summary
  log "$name (limit ${limit} s)"
  ( cd "$WORK/cwd" && exec env "$MARKER" timeout -k 5 "$limit" "$@" ) >"$WORK/step.log" 2>&1 &
  wait $!
  STEP_RC=$?
  STEP_WALL=$((SECONDS - current_start))
  if [ "$STEP_RC" = 124 ] || [ "$STEP_RC" = 137 ]; then
    STEP_STATUS=timeout
    py sweep "$MARKER" >>"$WORK/step.log" 2>&1
  else
    STEP_STATUS=done
  fi
  append_log "$name (exit $STEP_RC, ${STEP_WALL} s of ${limit} s)" "$WORK/step.log"
  current_name=""
  rm -f "$STATE/current"
}

# ---------------------------------------------------------------------------- preflight
log "bundle $BUNDLE, output $OUT"
msg=$(py verify "$BUNDLE" 2>&1) || refuse "$msg"
probe_err=$WORK/probe.err
timeout -k 5 $((quick ? 30 : 60)) python3 -B -W ignore "$BUNDLE/bundle.py" probe "$BUNDLE" >"$STATE/probe.json" 2>"$probe_err"
rc=$?
if [ "$rc" != 0 ]; then
  rm -f "$STATE/probe.json"
  [ "$rc" = 124 ] && refuse "python3 -c 'import torch' did not finish in time"
  refuse "$(grep -v '^\s*$' "$probe_err" | sed 's/^refused: //' | tail -n 20)"
fi
pj() { python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print("\n".join(v) if isinstance(v,list) else v)' "$STATE/probe.json" "$1"; }
TORCH_LIB=$(pj torch_lib)
NVIDIA_LIBS=$(pj nvidia_libs | paste -sd: -)
NGPU=$(pj device_count)
PYEXE=$(pj python)
# The binaries' library path: LibTorch's folder, the wheel's CUDA libraries, the bundle's lib/.
# Python itself keeps the caller's (TC_PY_LD_LIBRARY_PATH): torchrun runs under it, and passes the
# binaries' path on to its workers (see the torchrun wrapper below).
BIN_LDP=$TORCH_LIB${NVIDIA_LIBS:+:$NVIDIA_LIBS}:$BUNDLE/lib
export TC_PY_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}

# torchrun of this python3 (the checked torch), whatever torchrun is on PATH.
cat >"$WORK/torchrun" <<EOF
#!/bin/sh
export TC_CHILD_LD_LIBRARY_PATH="\${LD_LIBRARY_PATH:-}"
export LD_LIBRARY_PATH="\${TC_PY_LD_LIBRARY_PATH:-}"
exec "$PYEXE" -c 'import os, runpy, sys
os.environ["LD_LIBRARY_PATH"] = os.environ.pop("TC_CHILD_LD_LIBRARY_PATH")
sys.argv[0] = "torchrun"
runpy.run_module("torch.distributed.run", run_name="__main__")' "\$@"
EOF
chmod +x "$WORK/torchrun"
export TORCHCONFORM_TORCHRUN=$WORK/torchrun

{
  echo "== run.sh $* (bundle $BUNDLE), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo; echo "== uname -a"; uname -a
  echo; echo "== /etc/os-release"; cat /etc/os-release 2>/dev/null
  echo; echo "== python3 + torch (bundle.py probe)"; cat "$STATE/probe.json"
  echo; echo "== binaries' LD_LIBRARY_PATH"; echo "$BIN_LDP"
} >"$OUT/environment.txt"
# ldd with that path; when the machine's libstdc++ / libgcc_s lack a version the binaries need
# (or are absent), the bundle's lib/cxx/ joins the path (it needs a newer glibc than the binaries).
ldd_all() {
  local b
  for b in "$BIN"/*; do
    printf '\n== ldd %s (LD_LIBRARY_PATH as above)\n' "${b#"$BUNDLE"/}"
    LD_LIBRARY_PATH=$BIN_LDP ldd "$b" 2>&1
  done
}
lddout=$(ldd_all)
if grep 'not found' <<<"$lddout" | grep -qE 'libstdc\+\+\.so\.6|libgcc_s\.so\.1'; then
  printf '\n== the machine'"'"'s libstdc++ / libgcc_s fall short:%s\n' "$(grep 'not found' <<<"$lddout" | sort -u | sed 's/^/\n  /')" \
    >>"$OUT/environment.txt"
  BIN_LDP=$BIN_LDP:$BUNDLE/lib/cxx
  log "the machine's libstdc++ lacks what the binaries need: using the bundle's lib/cxx/"
  echo "$BIN_LDP" >"$STATE/cxx_fallback"
  lddout=$(ldd_all)
fi
echo "$lddout" >>"$OUT/environment.txt"
missing=$(for b in "$BIN"/*; do
  LD_LIBRARY_PATH=$BIN_LDP ldd "$b" 2>&1 | grep 'not found' | sed "s|^[[:space:]]*|${b##*/}: |"
done | sort -u)
if [ -n "$missing" ]; then
  refuse "shared libraries not found (ldd; environment.txt has the whole output):
$missing"
fi
log "ldd: every binary resolves every library"
{
  echo; echo "== nvidia-smi"
  if command -v nvidia-smi >/dev/null; then
    timeout 20 nvidia-smi 2>&1
    echo; echo "== nvidia-smi topo -m"; timeout 20 nvidia-smi topo -m 2>&1
    echo; echo "== nvidia-smi -q"; timeout 30 nvidia-smi -q 2>&1
  else
    echo "(no nvidia-smi on PATH)"
  fi
  echo; echo "== environment (values of names with TOKEN, SECRET, PASSWORD, KEY or CREDENTIAL hidden)"
  env | LC_ALL=C sort | sed -E 's/^([^=]*(TOKEN|SECRET|PASSWORD|PASSWD|KEY|CREDENTIAL)[^=]*)=.*/\1=<hidden>/I'
} >>"$OUT/environment.txt" 2>&1
command -v nvidia-smi >/dev/null &&
  timeout 20 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1 >"$STATE/driver"
record_step preflight ok "$((SECONDS - T0))" - 0 "bundle intact, torch $(pj torch_version) (CUDA $(pj cuda_version)), ldd clean"

if [ "$DEVICE" = cpu ]; then
  log "TEST HOOK TC_BUNDLE_TEST_DEVICE=cpu: the steps run on the CPU (not a GPU result)"
  echo "TEST HOOK TC_BUNDLE_TEST_DEVICE=cpu: every step ran on the CPU; this is not a GPU result" >"$STATE/test_hook"
elif [ "${NGPU:-0}" -lt 1 ]; then
  why=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("cuda_error", ""))' "$STATE/probe.json")
  echo "run.sh: no CUDA device: torch.cuda.device_count() is 0${why:+ ($why)}; nothing to run on a GPU" >&2
  record_step devices refused 0 - 2 "no CUDA device"
  finish 2 "REFUSED (exit 2): no CUDA device (torch.cuda.device_count() is 0${why:+: $why}); no step ran"
fi
log "$NGPU CUDA device(s)"
if [ "$DEVICE" = cuda ]; then AR_BACKEND=nccl AR_NPROC=$NGPU; else AR_BACKEND=gloo AR_NPROC=2; fi

# ---------------------------------------------------------------------------- run, check by check
# Two passes, one `torchconform run` per check in each (a slow or hung check costs its own limit):
#   run:<check>       the judged cells: the reference and the broken variants the check must catch
#   run:<check>:rest  every other recipe on that check (recorded, not judged), while time is left
# A part's limit: up to CHECK_CAP, leaving FLOOR s for each part still to come in its pass, never
# less than its fair share of what is left; when that share is under 5 s, the parts run in order
# with what is left. The first pass's parts come first. run.json is re-merged after every part, so it holds whatever has finished.
failed=()
notrun=()  # parts and steps left out for lack of time
run_deadline=$((SECONDS + $(limit_for "$RUN_B" $((BENCH_B + AR_B))) - 15))  # 15 s: run:report
run_step list 20 env LD_LIBRARY_PATH="$BIN_LDP" "$BIN/torchconform" list --json
cp "$WORK/step.log" "$WORK/list.json"
record_step list "$STEP_STATUS" "$STEP_WALL" 20 "$STEP_RC" ""
# check <TAB> judged recipes <TAB> the other recipes (comma-separated)
mapfile -t plan < <(python3 - "$WORK/list.json" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
# The catalogue is the JSON object on stdout; stderr lines (if any) come before or after it.
doc = json.loads(text[text.index("{"):text.rindex("}") + 1])
recipes = [r["name"] for r in doc["recipes"]]
for c in doc["checks"]:
    judged = [r["name"] for r in doc["recipes"] if r["name"] == "reference" or c["name"] in r["targets"]]
    rest = [r for r in recipes if r not in judged]
    print("%s\t%s\t%s" % (c["name"], ",".join(judged), ",".join(rest)))
PY
)
if [ "${#plan[@]}" = 0 ]; then failed+=("list: torchconform list --json gave no check"); fi
parts=()
run_part() {  # name recipes cap parts_after
  local name=$1 recipes=$2 cap=$3 after=$4 check=${1#run:}
  check=${check%:rest}
  local remaining=$((run_deadline - SECONDS)) limit part note=""
  # Up to cap, leaving FLOOR s for each part after it, but never less than its fair share; once
  # the fair share is under 5 s the parts run in order, each with what is left, until it is spent.
  local fair=$((remaining / (after + 1))) greedy=$((remaining - FLOOR * after))
  limit=$((greedy > fair ? greedy : fair))
  [ "$fair" -lt 5 ] && limit=$remaining
  [ "$limit" -gt "$cap" ] && limit=$cap
  if [ "$limit" -lt 5 ]; then
    record_step "$name" not-run 0 - - "the run phase's time was spent"
    notrun+=("$name")
    return
  fi
  part=$WORK/parts/${name//:/_}.json
  # The distributed check's torchrun gets its own deadline, inside the part's.
  run_step "$name" "$limit" env LD_LIBRARY_PATH="$BIN_LDP" \
    TORCHCONFORM_DIST_LAUNCH_TIMEOUT_S=$((limit > 20 ? limit - 10 : 10)) \
    "$BIN/torchconform" run --device "$DEVICE" --check "$check" --recipe "$recipes" \
    $([ "$quick" = 1 ] && echo --quick) --json "$part" --html ""
  if [ "$STEP_STATUS" = timeout ]; then
    note="ran out of its ${limit} s"; failed+=("$name timed out")
  elif [ ! -s "$part" ]; then
    note="wrote no report"; STEP_STATUS=failed; failed+=("$name exit $STEP_RC, no report")
  else
    parts+=("$part")
    py merge "$OUT/run.json" "${parts[@]}" >>"$WORK/merge.log" 2>&1 || failed+=("$name: merge into run.json failed")
    [ "$STEP_RC" = 1 ] && note="a cell is not ok"
    [ "$STEP_RC" != 0 ] && [ "$STEP_RC" != 1 ] && { STEP_STATUS=failed; failed+=("$name exit $STEP_RC"); }
  fi
  record_step "$name" "$STEP_STATUS" "$STEP_WALL" "$limit" "$STEP_RC" "$note"
}
n=${#plan[@]}
i=0
for line in "${plan[@]}"; do
  IFS=$'\t' read -r check judged rest <<<"$line"
  i=$((i + 1))
  run_part "run:$check" "$judged" "$CHECK_CAP" $((n - i))
done
i=0
for line in "${plan[@]}"; do
  IFS=$'\t' read -r check judged rest <<<"$line"
  i=$((i + 1))
  [ -n "$rest" ] && run_part "run:$check:rest" "$rest" "$CHECK_CAP" 0  # in order, while time is left
done
if [ "${#parts[@]}" -gt 0 ]; then
  run_step run:report 15 env LD_LIBRARY_PATH="$BIN_LDP" "$BIN/torchconform" report "$OUT/run.json" --html "$OUT/run.html"
  [ "$STEP_STATUS" = done ] && [ "$STEP_RC" != 0 ] && STEP_STATUS=failed
  [ "$STEP_STATUS" = done ] || failed+=("run:report $STEP_STATUS (exit $STEP_RC)")
  record_step run:report "$STEP_STATUS" "$STEP_WALL" 15 "$STEP_RC" ""
else
  failed+=("run: no check wrote a report")
fi
summary

# ---------------------------------------------------------------------------- bench
# Two steps into one bench.json (the second merges into the first's report), so that the CUDA
# benchmarks survive a loader benchmark that runs out of time: bench:cuda (AMP train steps, matmul
# ceiling, host-to-device copies), then bench:loader (the loader on the CPU side, the data wait).
if [ "$quick" = 1 ]; then bench_flags=(--benchmark_repetitions=3 --benchmark_min_time=0.05)
else bench_flags=(--benchmark_repetitions=5); fi
bench_cuda_b=$((BENCH_B * 2 / 3))
for spec in "bench:cuda device:cuda $bench_cuda_b $((BENCH_B - bench_cuda_b + AR_B))" \
            "bench:loader ^data/loader/ $((BENCH_B - bench_cuda_b)) $AR_B"; do
  read -r name filter nominal later <<<"$spec"
  limit=$(limit_for "$nominal" "$later")
  if [ "$limit" -lt 10 ]; then
    record_step "$name" not-run 0 - - "time spent"; notrun+=("$name"); continue
  fi
  run_step "$name" "$limit" env LD_LIBRARY_PATH="$BIN_LDP" "$BIN/torchconform" bench --json "$OUT/bench.json" \
    "--benchmark_filter=$filter" "${bench_flags[@]}"
  [ "$STEP_STATUS" = timeout ] && failed+=("$name timed out")
  [ "$STEP_STATUS" = done ] && [ "$STEP_RC" != 0 ] && { STEP_STATUS=failed; failed+=("$name exit $STEP_RC"); }
  record_step "$name" "$STEP_STATUS" "$STEP_WALL" "$limit" "$STEP_RC" ""
done

# ---------------------------------------------------------------------------- all-reduce under torchrun, NCCL
limit=$(limit_for "$AR_B" 0)
if [ "$quick" = 1 ]; then ar_flags=(--max-bytes 64M --reps 3); else ar_flags=(--max-bytes 256M --reps 5); fi
if [ "$limit" -ge 10 ]; then
  run_step allreduce "$limit" env LD_LIBRARY_PATH="$BIN_LDP" "$TORCHCONFORM_TORCHRUN" --standalone --nnodes=1 \
    --nproc-per-node="$AR_NPROC" --max-restarts=0 --no-python "$BIN/tc_allreduce_bench" --backend "$AR_BACKEND" "${ar_flags[@]}" \
    --benchmark_out="$WORK/allreduce.json" --benchmark_out_format=json
  if python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$WORK/allreduce.json" 2>/dev/null; then
    cp "$WORK/allreduce.json" "$OUT/allreduce.json"
  fi
  [ "$STEP_STATUS" = timeout ] && failed+=("allreduce timed out")
  [ "$STEP_STATUS" = done ] && [ "$STEP_RC" != 0 ] && { STEP_STATUS=failed; failed+=("allreduce exit $STEP_RC"); }
  record_step allreduce "$STEP_STATUS" "$STEP_WALL" "$limit" "$STEP_RC" "$AR_BACKEND, world size $AR_NPROC"
else
  record_step allreduce not-run 0 - - "time spent"; notrun+=(allreduce)
fi

# ---------------------------------------------------------------------------- verdict
bad=$(python3 -c 'import json,sys
try: s = json.load(open(sys.argv[1]))["summary"]
except Exception: print(-1); sys.exit()
print(s["missed"] + s["false_alarm"] + s["error"])' "$OUT/run.json")
if [ "$bad" != 0 ] && [ "$bad" != -1 ]; then failed+=("$bad cell(s) missed / false_alarm / error"); fi
if [ "${#notrun[@]}" -gt 0 ]; then
  failed+=("${#notrun[@]} not run for lack of time: $(printf '%s ' "${notrun[@]}")")
fi
if [ "${#failed[@]}" = 0 ]; then
  finish 0 "OK (exit 0): every step ran, no cell is missed / false_alarm / error"
fi
finish 1 "NOT OK (exit 1): $(printf '%s; ' "${failed[@]}" | sed 's/; $//')"
