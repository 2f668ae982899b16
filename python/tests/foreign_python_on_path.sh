#!/bin/sh
# The embedded interpreter takes its standard library from the Python whose libpython the binary
# embeds, not from the first `python3` on PATH (an activated venv or a pyenv of another build of the
# same minor version): a decoy prefix first on PATH, whose standard library refuses to load, must
# change nothing. Usage: foreign_python_on_path.sh TORCHCONFORM RECIPE_SPEC RECIPE REPORT_JSON
set -eu
bin=$1 spec=$2 recipe=$3 report=$4
decoy=$(mktemp -d)
trap 'rm -rf "$decoy"' EXIT
mkdir -p "$decoy/bin" "$decoy/lib/python3.11/encodings"
printf '#!/bin/sh\nexit 3\n' > "$decoy/bin/python3"
chmod +x "$decoy/bin/python3"
for f in os.py encodings/__init__.py threading.py; do
  printf 'raise ImportError("the decoy standard library first on PATH was loaded")\n' > "$decoy/lib/python3.11/$f"
done
PATH="$decoy/bin:$PATH" "$bin" run --device cpu --check shapes --python "$spec" --recipe "$recipe" --html "" --json "$report"
