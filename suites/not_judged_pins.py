#!/usr/bin/env python3
"""The CPU matrix's "not judged" count, per check and promise, against the pins the checks declare.

    not_judged_pins.py CATALOGUE.json REPORT_DIR

CATALOGUE.json is `torchconform list --json` (each promise's `not_judged_cells`, null for timing
promises); REPORT_DIR holds the judged tier's reports, one per cell, `cpu.<check>.<recipe>.json`
(the conformance.cpu.<check>.<recipe> tests write them). A cell ends a promise not judged when the
promise's status is `recorded` and the cell was not skipped. For every (check, promise) the number
of such cells must not exceed the pin (->NotJudged in the check's registration, 0 unless pinned):
a change that judges less fails here, naming the cells and their reasons. On a machine without a
CUDA device the count must equal the pin, so that a change that judges more lowers the pin too
(with a CUDA device some promises are judged that a CPU-only machine cannot judge).
Timing promises are not counted: the machine's speed decides them.
"""
import json
import os
import sys
from collections import defaultdict


def judged_cells(catalogue):
    """(check, recipe) of the judged tier: correct recipes on every check, variants on their targets."""
    cells = []
    for check in catalogue["checks"]:
        for recipe in catalogue["recipes"]:
            if recipe.get("language", "c++") != "c++":
                continue
            if check.get("languages") and "c++" not in check["languages"]:
                continue  # no C++ cell at all (->Languages)
            targets = recipe.get("targets") or []
            if not targets or (check["covers_variants"] and check["name"] in targets):
                cells.append((check["name"], recipe["name"]))
    return cells


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        catalogue = json.load(f)
    report_dir = argv[2]
    exact = not catalogue.get("devices", {}).get("cuda", False)
    pins, timing = {}, set()
    for check in catalogue["checks"]:
        for p in check["promises"]:
            if p.get("timing"):
                timing.add((check["name"], p["id"]))
            else:
                pins[(check["name"], p["id"])] = p.get("not_judged_cells") or 0
    found = defaultdict(list)  # (check, promise) -> [(recipe, evidence)]
    missing, ran = [], 0
    for check, recipe in judged_cells(catalogue):
        path = os.path.join(report_dir, f"cpu.{check}.{recipe}.json")
        if not os.path.exists(path):
            missing.append(path)
            continue
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
        for cell in report.get("cells", []):
            if cell.get("verdict") == "skipped":
                continue
            ran += 1
            seen = set()  # a promise judged per dtype or device may be recorded twice in a cell
            for p in (cell.get("metrics") or {}).get("promises") or []:
                key = (check, p.get("id"))
                if p.get("status") == "recorded" and key not in timing and key not in seen:
                    seen.add(key)
                    found[key].append((recipe, p.get("evidence", "")))
    if missing:
        print(f"[not_judged] {len(missing)} report(s) of the judged tier missing (their tests did not run): "
              + ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else ""))
        return 1
    failed = False
    print(f"[not_judged] {ran} cells of the CPU matrix's judged tier; cells ending a promise not judged, "
          f"against the pin (->NotJudged in the check's registration):")
    by_check = defaultdict(int)
    for key in sorted(set(found) | {k for k, v in pins.items() if v}):
        n, pin = len(found.get(key, [])), pins.get(key, 0)
        by_check[key[0]] += n
        mark = "ok"
        if n > pin:
            mark, failed = "MORE than pinned", True
        elif n < pin and exact:
            mark, failed = "fewer than pinned: lower the pin", True
        print(f"  {key[0]}.{key[1]}: {n} (pin {pin}) {mark}")
        if mark != "ok":
            for recipe, evidence in found.get(key, []):
                print(f"      {recipe}: {evidence[:300]}")
    print("[not_judged] per check: " + ", ".join(f"{c} {n}" for c, n in sorted(by_check.items())))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
