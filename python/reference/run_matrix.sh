#!/usr/bin/env bash
# The Python reference and every Python variant, beside the C++ reference, through every check on
# the CPU (about 8 minutes on 2 cores), then the matrix as a table:
#   python/reference/run_matrix.sh [BINARY] [REPORT.json]
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-build/torchconform}
out=${2:-/tmp/py-matrix.json}
variants=(NoEval NoGradMissing NoTrainAfterEval NoSeed UnseededWorkers WeightsOnlyCheckpoint NoOptimizerState
          NoSchedulerState NoRngState NoSamplerPosition ViewFlatten HardcodedCuda DefaultInit InplaceOnSaved
          SilentInplaceOnSaved ReentrantCheckpoint IgnoresCheckpointing)
args=(--python python/reference/reference.py:PythonReference)
recipes=reference,py_reference
for v in "${variants[@]}"; do
  args+=(--python "python/reference/variants.py:$v")
  recipes+=",py_$(sed -E 's/([a-z0-9])([A-Z])/\1_\2/g' <<<"$v" | tr 'A-Z' 'a-z')"
done
"$bin" run --device cpu "${args[@]}" --recipe "$recipes" --json "$out" --html '' || true  # exit 1 while a cell is missed
python3 python/reference/matrix_table.py "$out"
