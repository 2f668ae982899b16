#!/usr/bin/env python3
"""The checks' teeth, asserted on the cells a conformance ctest ran (one run, no cell computed twice).

    teeth_cell.py CATALOGUE.json REPORT.json -- torchconform run ... --json REPORT.json

Runs the command (a `torchconform run` of one cell on the CPU, or of one check's judged recipes on
CUDA), then reads the report it wrote and requires of every judged cell, against the catalogue
(`torchconform list --json`: each check's promises, which are timing promises, each variant's
targets and the promises it declares it breaks):

- the verdict is `ok` (a skipped cell only where the runner may skip it: no device, a variant that
  needs CUDA on a machine without one, a practice that cannot be checked from C++; a C++ recipe
  gets no cell at all on a check of Python recipes only, ->Languages); exit 77 then, which CTest
  reads as skipped;
- metrics.promises lists promises the check registered, each with a status (held, broken,
  recorded) and its evidence;
- the reference (a control) passes with every promise the check registered judged `held`, except a
  timing promise or one that needs hardware the machine lacks, which may be `recorded` with why;
- a broken variant fails by breaking exactly the promises it declares it breaks (->Breaks), apart
  from the check's timing promises, which the machine's speed may break too; never by the recipe
  crashing with an error the check does not declare;
- a measured promise (deviation / bar) is beyond its bar by at least MIN_MARGIN where a variant
  breaks it, and inside it by as much where the reference holds it;
- the evidence of a few cells names what the catch is about (EVIDENCE below);
- the run leaves nothing in the temporary folder (TMPDIR, a fresh one for the run) but torch's own
  compiler cache, which stays where it was: not multiprocessing's directory of a process that ran
  a recipe and ended without its interpreter's exit handlers (pymp-*), not torchrun's log
  directory (torchelastic_*), not a scratch directory of the run's.

The same rules as the `Teeth` unit tests had, on the cells the conformance ctests compute anyway.
Exit: 0 every rule held, 1 a rule broke (each named), 77 every cell skipped, 2 bad usage.
"""
import getpass
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# A measured promise must clear its bar by this factor (deviation / bar). Every figure judged on the
# CPU is deterministic for a seed (same kernels, same order, same allocations), so a factor of 1.5 is
# far beyond run-to-run noise; a variant within it of the bar would be caught by a hair.
MIN_MARGIN = 1.5

# Promises the reference may leave `recorded` (not judged) on some machines, and why.
MAY_BE_RECORDED = {
    ("device_agnostic", "cpu_cuda_tolerance"): "judged only where CPU and CUDA both exist",
    ("data_saturation", "async_copy"): "judged only on CUDA",
}

# Probes a Python recipe cannot give yet (no Python twin, docs/python.md): its cell that needs one
# skips, naming the probe.
NO_PYTHON_TWIN = ("LoaderProbe", "AmpProbe", "DistributedProvider",
                  # how suites/support/kit.cpp says it to a Python recipe (naming no C++ interface)
                  "torchconform.Run has no method through which")
# Promises of a check that runs for a Python recipe but judges them through such a probe: absent there.
NEEDS_NO_PYTHON_TWIN = {("resume_equality", "resume_bitwise_amp"): "AmpProbe"}

# What the evidence of a caught cell must name, beyond its broken promise: (check, recipe) -> texts.
EVIDENCE = {
    # Nothing cast: the ops that ran in fp32 are named (the CNN's convolution and its linear layer).
    ("amp", "autocast_wrong_device"): ["not cast: ", "aten::conv2d", "in fp32)"],
    ("amp", "inputs_cast_only"): ["not cast: ", "aten::conv2d", "in fp32)"],
    # Two runs in one process share the per-process salt; the fresh process has another.
    ("reproducibility", "process_salted_augmentation"): [
        "in a fresh process differs from this process's: loss curves diverge at step 0"],
    # The fp16 pass diverged (first); the fp32 pass held, bitwise.
    ("resume_equality", "no_scaler_state"): ["- with fp16 autocast + GradScaler:", "  held: ", "bitwise equal"],
}


def fail(problems, where, text):
    problems.append(f"{where}: {text}")


def judge_cell(cell, catalogue, problems):
    checks = {c["name"]: c for c in catalogue["checks"]}
    recipes = {r["name"]: r for r in catalogue["recipes"]}
    where = f'{cell["check"]} / {cell["recipe"]} on {cell["device"]}'
    check = checks.get(cell["check"])
    recipe = recipes.get(cell["recipe"])
    if check is None or recipe is None:
        fail(problems, where, "not in the catalogue")
        return
    registered = {p["id"]: p for p in check["promises"]}
    timing = {p["id"] for p in check["promises"] if p.get("timing")}
    expected, verdict, evidence = cell["expected"], cell["verdict"], cell["evidence"]

    if verdict == "skipped":
        ok = (check.get("unsupported") is not None or
              # recorded, not judged: a practice another check owns is broken (named as such)
              (expected == "any" and evidence.startswith("precondition not met")) or
              # recorded, not judged: a variant of another check that lacks this check's probe
              (expected == "any" and " does not implement tc::" in evidence) or
              (recipe.get("needs") == "cuda" and not catalogue["devices"]["cuda"]) or
              cell["device"] == "cuda" and not catalogue["devices"]["cuda"] or
              recipe.get("language") == "python" and any(p in evidence for p in NO_PYTHON_TWIN))
        if not ok:
            fail(problems, where, f"skipped where it must be judged: {evidence}")
        if not evidence:
            fail(problems, where, "skipped without a reason")
        return
    if verdict != "ok":
        fail(problems, where, f"verdict {verdict} (outcome {cell['outcome']}): {evidence}")
    if expected == "any":
        return

    metrics = cell.get("metrics") or {}
    promises = metrics.get("promises")
    if not isinstance(promises, list) or not promises:
        fail(problems, where, f"no metrics.promises list\n{evidence}")
        return
    broken, statuses = set(), {}
    for p in promises:
        pid, status = p.get("id", ""), p.get("status", "")
        if pid not in registered:
            fail(problems, where, f"promise '{pid}' is not one the check registered")
        if status not in ("held", "broken", "recorded"):
            fail(problems, where, f"promise '{pid}' has status '{status}'")
        if not p.get("evidence"):
            fail(problems, where, f"promise '{pid}' has no evidence")
        # A promise judged several times (per dtype, per pass) is broken if any judgement broke it.
        if status == "broken":
            broken.add(pid)
        statuses.setdefault(pid, set()).add(status)
        margin = p.get("margin")
        if isinstance(margin, (int, float)):
            print(f"[margin] {where} / {pid}: {status}, deviation {p.get('deviation')} / bar {p.get('bar')} = {margin:.4g}")
            if expected == "fail" and status == "broken" and margin < MIN_MARGIN:
                fail(problems, where, f"caught by a hair: margin {margin:.4g} < {MIN_MARGIN}: {p}")
            if expected == "pass" and status == "held" and margin > 1 / MIN_MARGIN:
                fail(problems, where, f"held by a hair: margin {margin:.4g} > 1/{MIN_MARGIN}: {p}")

    if expected == "pass":
        if cell["outcome"] != "pass":
            fail(problems, where, f"outcome {cell['outcome']}: {evidence}")
        if broken:
            fail(problems, where, f"broke {sorted(broken)}")
        if cell["role"] == "reference":
            for pid in registered:
                st = statuses.get(pid, set())
                if st == {"held"}:
                    continue
                if "recorded" in st and "broken" not in st and (pid in timing or (check["name"], pid) in MAY_BE_RECORDED):
                    continue
                if not st and recipe.get("language") == "python" and (check["name"], pid) in NEEDS_NO_PYTHON_TWIN:
                    continue
                fail(problems, where, f"the reference's promise '{pid}' is {sorted(st) or 'absent'}, not held")
    else:  # a variant this check must catch
        if cell["outcome"] != "fail":
            fail(problems, where, f"outcome {cell['outcome']}: {evidence}")
        if "recipe threw" in evidence:
            fail(problems, where, f"caught by the recipe crashing, not by a promise: {evidence}")
        declared = set((recipe.get("breaks") or {}).get(check["name"], []))
        if not declared:
            fail(problems, where, "the variant declares no promise it breaks here (->Breaks)")
        missing = declared - broken
        extra = broken - declared - timing
        if missing:
            fail(problems, where, f"declares it breaks {sorted(missing)}, which held: broken {sorted(broken)}")
        if extra:
            fail(problems, where, f"also broke {sorted(extra)}, which it does not declare (declared {sorted(declared)})")
        if broken & timing - declared:
            print(f"[teeth] {where}: timing promise(s) {sorted(broken & timing - declared)} broken too on this machine")
        print(f"[teeth] {where}: caught by {sorted(broken)} (declared {sorted(declared)})")
    for text in EVIDENCE.get((cell["check"], cell["recipe"]), []):
        if verdict == "ok" and text not in evidence:
            fail(problems, where, f"the evidence does not name '{text}':\n{evidence}")


def user():
    """The name Inductor's default cache directory ends with (torch._inductor.runtime.cache_dir_utils)."""
    try:
        name = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        name = f"uid_{os.getuid()}"
    return re.sub(r'[\\/:*?"<>|]', "_", name)


def main(argv):
    if len(argv) < 5 or argv[3] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    catalogue_path, report_path, cmd = argv[1], argv[2], argv[4:]
    with open(catalogue_path) as f:
        catalogue = json.load(f)
    if os.path.exists(report_path):
        os.remove(report_path)  # never judge a report an earlier run left
    sys.stdout.flush()
    # A temporary folder of the run's own, to see what it leaves there, holding Inductor's default
    # cache directory as a link to the usual one: cells share that cache (`--quick` torch_compile).
    cache = os.path.join(tempfile.gettempdir(), "torchinductor_" + user())
    os.makedirs(cache, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="tc-teeth-tmp-")
    os.symlink(cache, os.path.join(tmp, os.path.basename(cache)))
    try:
        rc = subprocess.call(cmd, env=dict(os.environ, TMPDIR=tmp))
        left = sorted(set(os.listdir(tmp)) - {os.path.basename(cache)})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if rc not in (0, 1, 77):
        # 2: bad usage or environment (e.g. no CUDA device: CTest reads that output as a skip).
        print(f"teeth_cell: the run exited {rc}", file=sys.stderr)
        return rc if 0 < rc < 128 else 1
    try:
        with open(report_path) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        print(f"teeth_cell: the run wrote no readable report at {report_path}: {e}", file=sys.stderr)
        return 1
    problems = []
    if left:
        problems.append("the run left in its temporary folder: " + ", ".join(left))
    cells = report.get("cells", [])
    if not cells:
        problems.append("the report holds no cell")
    for cell in cells:
        judge_cell(cell, catalogue, problems)
    if problems:
        print(f"teeth_cell: {len(problems)} rule(s) broken:", file=sys.stderr)
        for p in problems:
            print("  - " + p.replace("\n", "\n    "), file=sys.stderr)
        return 1
    if rc == 1:
        print("teeth_cell: the run exited 1, yet every cell held its rules", file=sys.stderr)
        return 1
    if all(c["verdict"] == "skipped" for c in cells):
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
