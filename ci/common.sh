# Shared set-up for ci/suite, ci/test (sourced). Idempotent; quick when nothing is missing.
#
# Installs what is missing: Debian packages, a Python venv with the pinned torch (kept outside the
# clone, so every clone on this machine reuses it), then configures and builds into build/.
#
# Environment:
#   TORCHCONFORM_VENV      venv path (default ~/.cache/torchconform/venv-torch-<version>)
#   CMAKE_PREFIX_PATH / Torch_DIR   use this LibTorch instead of the pinned wheel's
#   TC_BUILD_DIR           build directory (default build)
#   TC_JOBS                parallel build jobs (default: number of cores)
set -euo pipefail

# The pinned torch: the newest 2.x on PyPI that installs and builds here (see README).
TC_TORCH_VERSION=2.15.0
TC_JSONSCHEMA_VERSION=4.26.0
# Beside torch in the venv: the report schema test's validator; the wheel's build backend and the
# pytest plugin's runner (ctest python.wheel: pyproject.toml, python/torchconform/pytest_plugin.py).
TC_PIP_PINS=("jsonschema==$TC_JSONSCHEMA_VERSION" "scikit-build-core==0.11.6" "pytest==8.4.2")
TC_DEBS=(cmake ninja-build g++ git ccache libgtest-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev libssl-dev
         chromium     # chromium: the HTML report test renders the page headless
         libgloo-dev  # Gloo headers: ProcessGroupGloo.hpp includes them (the wheel ships none)
         python3.11-dev  # the libpython the Python bridge embeds (python/CMakeLists.txt)
         clang libclang-rt-14-dev  # ci/fuzz: clang 14 and its libFuzzer/ASan/UBSan runtimes
         valgrind  # `bench --measure instructions`: callgrind and its client-request headers
         universal-ctags)  # ci/code-shape: the length of every function (ctest code.shape_limits)

TC_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TC_BUILD_DIR=${TC_BUILD_DIR:-$TC_ROOT/build}
TC_VENV=${TORCHCONFORM_VENV:-$HOME/.cache/torchconform/venv-torch-$TC_TORCH_VERSION}
TC_JOBS=${TC_JOBS:-$(nproc)}

tc_log() { printf '[ci] %s\n' "$*" >&2; }

tc_ensure_debs() {
  local missing=()
  for p in "${TC_DEBS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then return; fi
  tc_log "installing Debian packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

tc_ensure_venv() {
  local py="$TC_VENV/bin/python"
  if [ -x "$py" ] && "$py" - "$TC_TORCH_VERSION" "${TC_PIP_PINS[@]}" 2>/dev/null <<'PY'
import sys, importlib.metadata as m
ok = m.version("torch").split("+")[0] == sys.argv[1]
for pin in sys.argv[2:]:
    name, version = pin.split("==")
    ok = ok and m.version(name) == version
sys.exit(0 if ok else 1)
PY
  then return; fi
  tc_log "creating $TC_VENV with torch==$TC_TORCH_VERSION (a few GB, once per machine)"
  mkdir -p "$(dirname "$TC_VENV")"
  [ -x "$py" ] || python3 -m venv "$TC_VENV"
  "$TC_VENV/bin/pip" install -q --disable-pip-version-check \
    "torch==$TC_TORCH_VERSION" "${TC_PIP_PINS[@]}"
}

tc_configure_only() {
  # -DTC_WERROR=ON: a warning fails the build. Every build directory ci/ configures has it, so that
  # its compile commands, and so ccache's keys, are the same in every clone (CI's included).
  local args=(-S "$TC_ROOT" -B "$TC_BUILD_DIR" -G Ninja "-DTC_PYTHON=$TC_VENV/bin/python" -DTC_WERROR=ON)
  if [ ! -f "$TC_BUILD_DIR/CMakeCache.txt" ] || \
     ! grep -q "^TC_PYTHON:.*=$TC_VENV/bin/python$" "$TC_BUILD_DIR/CMakeCache.txt" || \
     ! grep -q "^TC_WERROR:BOOL=ON$" "$TC_BUILD_DIR/CMakeCache.txt"; then
    tc_log "configuring $TC_BUILD_DIR"
    cmake "${args[@]}" >"$TC_BUILD_DIR.configure.log" 2>&1 || {
      cat "$TC_BUILD_DIR.configure.log" >&2
      tc_log "configure failed (log above)"
      exit 2
    }
  fi
}

tc_configure_and_build() {
  tc_configure_only
  tc_log "building ($TC_JOBS jobs)"
  cmake --build "$TC_BUILD_DIR" -j "$TC_JOBS"
}

tc_setup() {
  tc_ensure_debs
  tc_ensure_venv
  tc_configure_and_build
}

# The environment ctest runs in (ci/test, ci/test-under-load, ci/nightly's slow tier). OpenMP
# threads that wait for work sleep instead of spinning (libgomp spins first): under -j2 one test's
# spinning threads took the cores the other test computes on. Measured side by side beside two
# other runs of the suite (farm-bench, 2026-12-05): generated.cpu.step_hygiene 0.49x the wall time, a
# C++ run of six checks 0.33x, a Python cell 0.94x. An OMP_WAIT_POLICY already set is kept.
tc_test_env() {
  export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
}

# After a ctest run that wrote JUnit to $2: when it failed ($1 not 0), print last why each failed test
# failed (ci/failure-digest), so a log read by its head and tail still shows it. Never fails.
tc_failure_digest() {
  if [ "$1" != 0 ] && [ -f "$2" ]; then "$TC_VENV/bin/python" "$TC_ROOT/ci/failure-digest" --junit "$2" || true; fi
}
