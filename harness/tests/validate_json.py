#!/usr/bin/env python3
"""Validates a torchconform `ab` or `qualify` JSON document against its committed JSON Schema
(python-jsonschema), and checks what a schema cannot express.

Usage: validate_json.py SCHEMA DOCUMENT [--self-test]

Every *.schema.json beside SCHEMA is registered, so that a schema may refer to another by file name
(qualify's `tool` and `environment` are the run report's). By the document's "schema" field:
  torchconform.ab/1       summary = the benchmarks' statuses counted; exit_code as ab's rule
                          (1 on a regression, or with run.strict on an inconclusive one); one entry
                          in rounds per round run, indexed in order; per benchmark as many values in
                          rounds, base and new (and ratios, unless unit_changed), each ratio new/base,
                          the round indices valid, the interval around the median ratio;
  torchconform.qualify/2  summary = the ranks and flags counted, exit_code 1 exactly when flagged;
                          the ranks numbered in order; per figure at most one value per rank, each
                          `flagged` as the rule says (value < centre - bound); a flagged figure or
                          fingerprint has its rank in flags, and every flag names a rank that has one;
                          fingerprint.differs one per rank (with two ranks or more).
With --self-test it then breaks the document in several ways and requires each broken copy to be
rejected, so the validation is shown to have teeth. (Run reports: validate_report.py.)
"""
import copy
import glob
import json
import math
import os
import sys

import jsonschema
from referencing import Registry, Resource


def registry_beside(schema_path):
    resources = []
    for path in sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(schema_path)), "*.schema.json"))):
        with open(path) as f:
            contents = json.load(f)
        resources.append((contents["$id"], Resource.from_contents(contents)))
    return Registry().with_resources(resources)


def ab_problems(doc):
    out = []
    benches, run = doc["benchmarks"], doc["run"]
    counts = {}
    for b in benches:
        counts[b["status"]] = counts.get(b["status"], 0) + 1
    for status, n in doc["summary"].items():
        if n != counts.get(status, 0):
            out.append(f"summary.{status} = {n}, the benchmarks say {counts.get(status, 0)}")
    want_exit = 1 if counts.get("regression", 0) or (run["strict"] and counts.get("inconclusive", 0)) else 0
    if doc["exit_code"] != want_exit:
        out.append(f"exit_code = {doc['exit_code']}, the statuses say {want_exit}")
    if len(doc["rounds"]) != run["rounds"]:
        out.append(f"rounds has {len(doc['rounds'])} entries, run.rounds = {run['rounds']}")
    if run["rounds"] > run["rounds_planned"]:
        out.append(f"run.rounds = {run['rounds']} exceeds run.rounds_planned = {run['rounds_planned']}")
    for i, r in enumerate(doc["rounds"]):
        if r["index"] != i:
            out.append(f"rounds/{i}: index = {r['index']}")
    for i, b in enumerate(benches):
        where = f"benchmarks/{i} ({b['name']})"
        n = len(b["rounds"])
        if len(b["base"]) != n or len(b["new"]) != n:
            out.append(f"{where}: {n} rounds but {len(b['base'])} base and {len(b['new'])} new values")
        want_ratios = 0 if b["status"] == "unit_changed" else n
        if len(b["ratios"]) != want_ratios:
            out.append(f"{where}: {len(b['ratios'])} ratios, expected {want_ratios}")
        if any(r >= run["rounds"] for r in b["rounds"]) or b["rounds"] != sorted(set(b["rounds"])):
            out.append(f"{where}: round indices {b['rounds']} are not increasing indices below {run['rounds']}")
        if len(b["ratios"]) == len(b["base"]) == len(b["new"]) == n:
            for j, (ratio, base, new) in enumerate(zip(b["ratios"], b["base"], b["new"])):
                if not (base > 0 and math.isclose(ratio, new / base, rel_tol=1e-9)):
                    out.append(f"{where}: ratio {ratio} in round {b['rounds'][j]} is not new/base = {new}/{base}")
                    break
        if (b["median_ratio"] is None) != (not b["ratios"]):
            out.append(f"{where}: median_ratio {b['median_ratio']} with {len(b['ratios'])} ratios")
        iv = b["interval"]
        if iv is not None:
            if not b["ratios"] or b["median_ratio"] is None:
                out.append(f"{where}: an interval without ratios")
            elif not (iv["lo"] <= b["median_ratio"] <= iv["hi"]) or 2 * iv["k"] > len(b["ratios"]) + 1:
                out.append(f"{where}: interval [{iv['lo']}, {iv['hi']}] (k {iv['k']}) does not hold the median "
                           f"{b['median_ratio']} of {len(b['ratios'])} ratios")
            elif sorted(b["ratios"])[iv["k"] - 1] != iv["lo"] or sorted(b["ratios"])[-iv["k"]] != iv["hi"]:
                out.append(f"{where}: interval [{iv['lo']}, {iv['hi']}] is not the ratios' x(k), x(n+1-k) for k {iv['k']}")
    return out


def qualify_problems(doc):
    out = []
    ranks, flags = doc["ranks"], doc["flags"]
    s = doc["summary"]
    if s["ranks"] != len(ranks):
        out.append(f"summary.ranks = {s['ranks']}, there are {len(ranks)} ranks")
    if s["flags"] != len(flags):
        out.append(f"summary.flags = {s['flags']}, there are {len(flags)} flags")
    if s["exit_code"] != (1 if flags else 0):
        out.append(f"summary.exit_code = {s['exit_code']} with {len(flags)} flags")
    if [r["rank"] for r in ranks] != list(range(len(ranks))):
        out.append(f"ranks are numbered {[r['rank'] for r in ranks]}, expected 0..{len(ranks) - 1}")
    flagged_ranks = {f["rank"] for f in flags}
    should_flag = set()
    for fig in doc["figures"]:
        holders = [r["rank"] for r in ranks if any(f["name"] == fig["name"] for f in r["figures"])]
        if len(fig["per_rank"]) != len(holders):
            out.append(f"figure {fig['name']}: {len(fig['per_rank'])} values, {len(holders)} ranks have it")
            continue
        for rank, d in zip(holders, fig["per_rank"]):
            if d["flagged"] != (d["value"] < d["centre"] - d["bound"]):
                out.append(f"figure {fig['name']}, rank {rank}: flagged = {d['flagged']}, but value {d['value']} "
                           f"{'<' if d['value'] < d['centre'] - d['bound'] else '>='} centre {d['centre']} - bound {d['bound']}")
            if d["flagged"]:
                should_flag.add(rank)
    fp = doc["fingerprint"]
    if len(ranks) >= 2 and len(fp["differs"]) != len(ranks):
        out.append(f"fingerprint.differs has {len(fp['differs'])} entries for {len(ranks)} ranks")
    should_flag |= {ranks[i]["rank"] for i, d in enumerate(fp["differs"]) if d and i < len(ranks)}
    if fp["majority_count"] > len(ranks) or (fp["majority"] is None) != (fp["majority_count"] == 0):
        out.append(f"fingerprint: majority {fp['majority']!r} with majority_count {fp['majority_count']}")
    for rank in sorted(should_flag - flagged_ranks):
        out.append(f"rank {rank} has a flagged figure or fingerprint but no entry in flags")
    for rank in sorted(flagged_ranks - should_flag):
        out.append(f"flags name rank {rank}, which has no flagged figure or fingerprint")
    return out


CHECKS = {"torchconform.ab/1": ab_problems, "torchconform.qualify/2": qualify_problems}


def problems(validator, doc):
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    found = [("/".join(str(p) for p in e.path) or "(root)") + ": " + e.message for e in errors]
    if not found and doc.get("schema") in CHECKS:
        found = CHECKS[doc["schema"]](doc)
    return found


def first_benchmark(d):
    return d["benchmarks"][0]


MUTATIONS = {
    "torchconform.ab/1": {
        "other schema version": lambda d: d.__setitem__("schema", "torchconform.ab/2"),
        "unknown top-level field": lambda d: d.__setitem__("extra", 1),
        "unknown status": lambda d: first_benchmark(d).__setitem__("status", "slower"),
        "unknown pairing": lambda d: d["run"].__setitem__("pairing", "sideways"),
        "round order of one side": lambda d: d["rounds"][0].__setitem__("order", ["base"]),
        "benchmark without ratios field": lambda d: first_benchmark(d).pop("ratios"),
        "summary disagrees with benchmarks": lambda d: d["summary"].__setitem__(
            first_benchmark(d)["status"], d["summary"][first_benchmark(d)["status"]] + 1),
        "exit code disagrees with statuses": lambda d: d.__setitem__("exit_code", 1 - d["exit_code"]),
        "a ratio that is not new/base": lambda d: first_benchmark(d)["ratios"].__setitem__(
            0, first_benchmark(d)["ratios"][0] * 1.5),
        "a round missing": lambda d: d["rounds"].pop(),
        "a side without binary": lambda d: d["new"].pop("binary"),
    },
    "torchconform.qualify/2": {
        "other schema version": lambda d: d.__setitem__("schema", "torchconform.qualify/1"),
        "unknown top-level field": lambda d: d.__setitem__("extra", 1),
        "environment without libtorch": lambda d: d["environment"].pop("libtorch"),
        "tool of another name": lambda d: d["tool"].__setitem__("name", "other"),
        "params digest not hex": lambda d: d["ranks"][0]["fingerprint"]["params"].__setitem__("sha256", "xyz"),
        "a figure without samples": lambda d: d["ranks"][0]["figures"][0].__setitem__("samples", []),
        "summary disagrees with ranks": lambda d: d["summary"].__setitem__("ranks", d["summary"]["ranks"] + 1),
        "exit code disagrees with flags": lambda d: d["summary"].__setitem__("exit_code", 1 - d["summary"]["exit_code"]),
        "flagged against the rule": lambda d: d["figures"][0]["per_rank"][0].__setitem__(
            "flagged", not d["figures"][0]["per_rank"][0]["flagged"]),
        "a flag for a rank nothing flags": lambda d: d["flags"].append({"rank": 0, "what": "invented"})
        if not d["flags"] else d["flags"].clear(),
    },
}


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    schema_path, doc_path = sys.argv[1], sys.argv[2]
    with open(schema_path) as f:
        schema = json.load(f)
    with open(doc_path) as f:
        doc = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema, registry=registry_beside(schema_path),
                                                format_checker=jsonschema.FormatChecker())
    errors = problems(validator, doc)
    for e in errors[:20]:
        print(f"{doc_path}: {e}")
    if errors:
        return 1
    what = doc.get("schema")
    size = (f"{len(doc['benchmarks'])} benchmarks, {doc['run']['rounds']} rounds" if what == "torchconform.ab/1"
            else f"{len(doc['ranks'])} ranks, {len(doc['flags'])} flags" if what == "torchconform.qualify/2" else "")
    print(f"{doc_path}: valid {what} ({size})")
    if "--self-test" in sys.argv[3:]:
        mutations = MUTATIONS.get(what)
        if not mutations:
            print(f"self-test: no mutations for schema {what!r}")
            return 1
        for name, mutate in mutations.items():
            broken = copy.deepcopy(doc)
            try:
                mutate(broken)
            except (IndexError, KeyError) as e:
                print(f"self-test: cannot make '{name}' from this document ({type(e).__name__}: {e})")
                return 1
            found = problems(validator, broken)
            if not found:
                print(f"self-test: a document with '{name}' was accepted")
                return 1
            print(f"self-test: '{name}' rejected: {found[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
