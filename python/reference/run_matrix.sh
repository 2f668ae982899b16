#!/usr/bin/env bash
# The Python reference and every Python variant, beside the C++ reference, through every check on
# the CPU (every cell, the recorded ones too: longer than CTest's conformance.python.cpu.<check>,
# which runs each variant on the checks it targets only), then the matrix as a table:
#   python/reference/run_matrix.sh [BINARY] [REPORT.json]
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-build/torchconform}
out=${2:-/tmp/py-matrix.json}
args=(--python python/reference/reference.py --python python/reference/variants.py)
recipes=$("$bin" list --json "${args[@]}" 2>/dev/null |
          python3 -c 'import json,sys; print(",".join(["reference"] + [r["name"] for r in json.load(sys.stdin)["recipes"] if r.get("language") == "python"]))')
"$bin" run --device cpu "${args[@]}" --recipe "$recipes" --json "$out" --html '' || true  # exit 1 while a cell is missed
python3 python/reference/matrix_table.py "$out"
