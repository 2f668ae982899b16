#!/usr/bin/env python3
"""cell_promises.py REPORT.json STATUS[,STATUS...]: the report's one cell is `ok` and every promise its
check judged has one of the STATUSes (e.g. held: a correct recipe passes with nothing left merely
recorded; held,recorded: nothing broken, some promises not judged).
Exit 0 when so, 1 naming what is not."""
import json
import sys


def main() -> int:
    report, want = sys.argv[1], sys.argv[2].split(",")
    cells = json.load(open(report))["cells"]
    if len(cells) != 1:
        print(f"{report}: {len(cells)} cells, expected one")
        return 1
    c = cells[0]
    promises = c.get("metrics", {}).get("promises", [])
    bad = [f"{p['id']}: {p['status']} ({p['evidence'][:300]})" for p in promises if p["status"] not in want]
    if c["verdict"] != "ok" or not promises or bad:
        print(f"{c['check']} / {c['recipe']}: verdict {c['verdict']}: {c['evidence'][:500]}")
        for b in bad:
            print("  not " + "/".join(want) + ": " + b)
        return 1
    for p in promises:
        print(f"{p['id']}: {p['status']}: {p['evidence'][:200]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
