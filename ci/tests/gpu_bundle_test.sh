#!/usr/bin/env bash
# Test of the GPU bundle's refusals (ci/gpu-bundle.d/run.sh, exit 2) without building a bundle:
#
#   ci/tests/gpu_bundle_test.sh [PYTHON]     PYTHON: one with the pinned torch (default: $TC_PYTHON,
#                                             else ~/.cache/torchconform/venv-torch-2.15.0/bin/python)
#
# Each case copies run.sh and bundle.py into a fresh fake bundle (bin/ with a small program,
# MANIFEST.json with every file's size and sha256, as ci/gpu-bundle writes it), breaks one thing,
# and requires exit 2, the refusal's message on stderr, and, once OUTDIR exists, summary.txt
# saying REFUSED and no scratch folder left behind. Cases: bad usage (no OUTDIR, an unknown option,
# two OUTDIRs, TC_BUNDLE_TEST_DEVICE=tpu), no python3 on PATH, a damaged bundle (MANIFEST.json
# missing or not JSON, a file changed, a file missing), glibc too old, a python3 without torch,
# another torch version, a library ldd cannot find, and (on a machine without a GPU) no CUDA device.
# --help exits 0. A case whose precondition this machine lacks (no C compiler, a GPU present) says
# SKIP. Exit 0 when every case held, 1 otherwise (each failure: expected and seen). About 30 s.
set -uo pipefail

SRC=$(cd "$(dirname "$0")/../gpu-bundle.d" && pwd)
TORCH_PY=${1:-${TC_PYTHON:-$HOME/.cache/torchconform/venv-torch-2.15.0/bin/python}}
# This python's torch (version, CUDA version) and its CUDA devices, in one import.
read -r TORCH_VERSION CUDA_VERSION NGPU < <("$TORCH_PY" -W ignore -c 'import torch
try: n = torch.cuda.device_count()
except Exception: n = 0
print(torch.__version__, torch.version.cuda, n)' 2>/dev/null)
if [ -z "${NGPU:-}" ]; then
  echo "usage: $0 [PYTHON]   ('$TORCH_PY' is not a python with torch)" >&2
  exit 2
fi
TORCH_VERSION_RE=${TORCH_VERSION//./\\.}; TORCH_VERSION_RE=${TORCH_VERSION_RE//+/\\+}  # as a regex
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tc-bundle-test.XXXXXX")
failures=0
cases=0

# PATH folders with a chosen python3: the one with torch, and one without it (when there is one).
mkdir -p "$WORK/py-torch" "$WORK/py-none" "$WORK/py-absent" "$WORK/tmp"
printf '#!/bin/sh\nexec "%s" "$@"\n' "$TORCH_PY" >"$WORK/py-torch/python3"
chmod +x "$WORK/py-torch/python3"
NOTORCH_PY=""
for p in /usr/bin/python3 /usr/local/bin/python3; do
  if [ -x "$p" ] && ! "$p" -c 'import torch' 2>/dev/null; then NOTORCH_PY=$p; break; fi
done
[ -n "$NOTORCH_PY" ] && printf '#!/bin/sh\nexec "%s" "$@"\n' "$NOTORCH_PY" >"$WORK/py-none/python3" &&
  chmod +x "$WORK/py-none/python3"
# No python3 at all: only what run.sh needs before it looks for one.
for t in dirname sed; do ln -s "$(type -P "$t")" "$WORK/py-absent/$t"; done

# make_bundle DIR [KEY=JSON ...]: a fake bundle whose MANIFEST.json matches its files and this
# python's torch; KEY=JSON overrides a manifest field (e.g. torch_version='"2.11.0"'). Its two
# binaries are copies of `true`; BUNDLE_PROG=FILE puts FILE in bin/tc_allreduce_bench instead.
make_bundle() {
  local dir=$1
  shift
  mkdir -p "$dir/bin" "$dir/lib/cxx"
  cp "$SRC/run.sh" "$SRC/bundle.py" "$dir/"
  cp "$(type -P true)" "$dir/bin/torchconform"
  cp "${BUNDLE_PROG:-$(type -P true)}" "$dir/bin/tc_allreduce_bench"
  "$TORCH_PY" - "$dir" "$TORCH_VERSION" "$CUDA_VERSION" "$@" <<'PYEOF'
import hashlib, json, os, sys
stage, torch_version, cuda_version, overrides = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
files = {}
for root, _, names in os.walk(stage):
    for n in sorted(names):
        p = os.path.join(root, n)
        data = open(p, "rb").read()
        files[os.path.relpath(p, stage)] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
m = {"schema": "torchconform.gpu-bundle/1", "git_commit": "0" * 40, "git_dirty": False,
     "torch_version": torch_version, "cuda_version": None if cuda_version == "None" else cuda_version,
     "requires_glibc": "2.17", "files": dict(sorted(files.items()))}
for o in overrides:
    k, v = o.split("=", 1)
    m[k] = json.loads(v)
json.dump(m, open(os.path.join(stage, "MANIFEST.json"), "w"), indent=1)
PYEOF
}

# expect_refusal NAME EXIT REGEX PATHDIR BUNDLE [ENV=VAL ...] -- ARGS...: runs BUNDLE/run.sh with
# python3 from PATHDIR; requires exit EXIT and a line of its output matching REGEX (extended);
# when OUTDIR (the last argument) was made: summary.txt says REFUSED; no scratch folder is left.
expect_refusal() {
  local name=$1 want=$2 regex=$3 pathdir=$4 bundle=$5 envs=()
  shift 5
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  cases=$((cases + 1))
  local log=$WORK/$name.log t0=$SECONDS rc
  local path="$pathdir:/usr/bin:/bin"
  [ "$pathdir" = "$WORK/py-absent" ] && path=$pathdir  # not even /usr/bin's python3
  env PATH="$path" TMPDIR="$WORK/tmp" "${envs[@]}" /bin/bash "$bundle/run.sh" "$@" >"$log" 2>&1
  rc=$?
  local ok=1
  if [ "$rc" != "$want" ]; then
    echo "FAIL: $name: expected exit $want, got $rc"; ok=0
  fi
  if ! grep -qE -- "$regex" "$log"; then
    echo "FAIL: $name: expected output matching /$regex/, it was:"; sed 's/^/    | /' "$log" | tail -n 20; ok=0
  fi
  local out=${!#}
  if [ "$want" = 2 ] && [ -d "$out" ] && [ "$out" != "$bundle" ]; then
    if ! grep -q "^Result: REFUSED (exit 2)" "$out/summary.txt" 2>/dev/null; then
      echo "FAIL: $name: expected $out/summary.txt with 'Result: REFUSED (exit 2)', it has:"
      sed 's/^/    | /' "$out/summary.txt" 2>/dev/null | head -n 8; ok=0
    fi
  fi
  if compgen -G "$WORK/tmp/tc-gpu-bundle.*" >/dev/null; then
    echo "FAIL: $name: expected run.sh to remove its scratch folder, found $(ls -d "$WORK"/tmp/tc-gpu-bundle.*)"
    rm -rf "$WORK"/tmp/tc-gpu-bundle.*; ok=0
  fi
  [ "$ok" = 1 ] && echo "ok: $name (exit $rc, $((SECONDS - t0)) s)" || failures=$((failures + 1))
}
skip() { echo "SKIP: $1: $2"; }

PT=$WORK/py-torch
B=$WORK/good
make_bundle "$B"

# ---- bad usage (before anything is checked)
expect_refusal usage_no_outdir 2 "run.sh: OUTDIR missing" "$PT" "$B" --
expect_refusal usage_unknown_option 2 "run.sh: unknown option --bogus" "$PT" "$B" -- --bogus "$WORK/out-opt"
expect_refusal usage_two_outdirs 2 "run.sh: one OUTDIR only" "$PT" "$B" -- "$WORK/out-a" "$WORK/out-b"
expect_refusal usage_unknown_test_device 2 "TC_BUNDLE_TEST_DEVICE is cpu or unset" "$PT" "$B" \
  TC_BUNDLE_TEST_DEVICE=tpu -- "$WORK/out-tpu"
expect_refusal help_exits_0 0 "^Exit: 0 every step ran" "$PT" "$B" -- --help
expect_refusal no_python3 2 "refused: no python3 on PATH" "$WORK/py-absent" "$B" -- "$WORK/out-nopy"

# ---- a damaged bundle (bundle.py verify)
D=$WORK/no-manifest; make_bundle "$D"; rm "$D/MANIFEST.json"
expect_refusal manifest_missing 2 "refused: bundle is damaged: MANIFEST.json unreadable" "$PT" "$D" -- "$WORK/out-m1"
D=$WORK/bad-manifest; make_bundle "$D"; echo '{"files": ' >"$D/MANIFEST.json"
expect_refusal manifest_not_json 2 "refused: bundle is damaged: MANIFEST.json unreadable" "$PT" "$D" -- "$WORK/out-m2"
D=$WORK/changed; make_bundle "$D"; printf 'x' >>"$D/bin/tc_allreduce_bench"
expect_refusal file_changed 2 "bin/tc_allreduce_bench: size or sha256 differs from MANIFEST.json" "$PT" "$D" -- "$WORK/out-c"
D=$WORK/same-size; make_bundle "$D"; printf 'X' | dd of="$D/bundle.py" bs=1 seek=10 conv=notrunc status=none
expect_refusal file_changed_same_size 2 "bundle.py: size or sha256 differs from MANIFEST.json" "$PT" "$D" -- "$WORK/out-s"
D=$WORK/missing; make_bundle "$D"; rm "$D/bin/torchconform"
expect_refusal file_missing 2 "bin/torchconform: No such file or directory" "$PT" "$D" -- "$WORK/out-f"

# ---- this machine cannot run it (bundle.py probe)
D=$WORK/glibc; make_bundle "$D" requires_glibc='"99.0"'
expect_refusal glibc_too_old 2 "refused: the bundle's binaries need glibc >= 99.0, this machine has [0-9.]+" "$PT" "$D" -- "$WORK/out-g"
if [ -n "$NOTORCH_PY" ]; then
  expect_refusal no_torch 2 "refused: .* cannot import torch .*the bundle needs torch $TORCH_VERSION_RE" "$WORK/py-none" "$B" -- "$WORK/out-nt"
else
  skip no_torch "no python3 without torch found"
fi
D=$WORK/other-torch; make_bundle "$D" torch_version='"2.11.0"' cuda_version='"13.0"'
expect_refusal other_torch 2 "this bundle was built against torch 2.11.0 \(CUDA 13.0\), but .* has torch $TORCH_VERSION_RE" "$PT" "$D" -- "$WORK/out-t"

# ---- a library ldd cannot find: a program linked against a library then removed
if command -v cc >/dev/null; then
  L=$WORK/lib-src
  mkdir -p "$L"
  echo 'int tc_missing_for_test(void) { return 0; }' >"$L/m.c"
  echo 'int tc_missing_for_test(void); int main(void) { return tc_missing_for_test(); }' >"$L/main.c"
  if cc -shared -fPIC -o "$L/libtc_missing_for_test.so" "$L/m.c" && cc -o "$L/prog" "$L/main.c" -L"$L" -ltc_missing_for_test; then
    rm -f "$L/libtc_missing_for_test.so"
    D=$WORK/unresolved; BUNDLE_PROG=$L/prog make_bundle "$D"
    expect_refusal library_not_found 2 "refused: shared libraries not found" "$PT" "$D" -- "$WORK/out-l"
    grep -q "tc_allreduce_bench: libtc_missing_for_test.so => not found" "$WORK/library_not_found.log" ||
      { echo "FAIL: library_not_found: expected the line 'tc_allreduce_bench: libtc_missing_for_test.so => not found'"; failures=$((failures + 1)); }
  else
    skip library_not_found "cc could not build the test program"
  fi
else
  skip library_not_found "no C compiler"
fi

# ---- everything in order, but no CUDA device (only where there is none)
if [ "$NGPU" = 0 ]; then
  expect_refusal no_cuda_device 2 "run.sh: no CUDA device: torch.cuda.device_count\(\) is 0" "$PT" "$B" -- "$WORK/out-d"
  grep -q "^== ldd bin/torchconform" "$WORK/out-d/environment.txt" 2>/dev/null ||
    { echo "FAIL: no_cuda_device: expected environment.txt with the ldd of bin/torchconform"; failures=$((failures + 1)); }
else
  skip no_cuda_device "this machine has $NGPU CUDA device(s)"
fi

if [ "$failures" -gt 0 ]; then
  echo "gpu_bundle_test: $failures of $cases case(s) failed; files kept in $WORK"
  exit 1
fi
rm -rf "$WORK"
echo "gpu_bundle_test: PASS ($cases cases)"
