#!/usr/bin/env python3
"""Validates a torchconform report against the committed JSON Schema (python-jsonschema).

Usage: validate_report.py SCHEMA REPORT [--self-test]
Also checks the summary counts against the cells, which a schema cannot express. With --self-test
it then breaks the report in several ways and requires each broken copy to be rejected, so the
validation itself is shown to have teeth.
"""
import copy
import json
import sys

import jsonschema


def problems(schema, report):
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    errors = sorted(validator.iter_errors(report), key=lambda e: list(e.path))
    if not errors:
        summary = report["summary"]
        counts, by_role = {}, {}
        for cell in report["cells"]:
            counts[cell["verdict"]] = counts.get(cell["verdict"], 0) + 1
            if "role" in cell:
                role = by_role.setdefault(cell["role"], {"total": 0})
                role[cell["verdict"]] = role.get(cell["verdict"], 0) + 1
                role["total"] += 1
        for verdict in ("ok", "missed", "false_alarm", "fail", "error", "skipped"):
            if verdict not in summary and verdict == "fail":
                continue  # a report written before the fail verdict
            if summary[verdict] != counts.get(verdict, 0):
                errors.append(f"summary.{verdict} = {summary[verdict]}, cells say {counts.get(verdict, 0)}")
        if summary["total"] != len(report["cells"]):
            errors.append("summary.total does not match the number of cells")
        if "by_role" in summary:
            for role in set(by_role) | set(summary["by_role"]):
                mine, theirs = by_role.get(role, {}), summary["by_role"].get(role, {})
                for key in set(mine) | set(theirs):
                    if mine.get(key, 0) != theirs.get(key, 0):
                        errors.append(f"summary.by_role.{role}.{key} = {theirs.get(key, 0)}, cells say {mine.get(key, 0)}")
    return [
        ("/".join(str(p) for p in getattr(e, "path", [])) or "(root)") + ": " + getattr(e, "message", str(e))
        for e in errors
    ]


MUTATIONS = {
    "other schema version": lambda r: r.__setitem__("schema", "torchconform.report/2"),
    "cell without verdict": lambda r: r["cells"][0].pop("verdict"),
    "unknown verdict": lambda r: r["cells"][0].__setitem__("verdict", "passed"),
    "summary disagrees with cells": lambda r: r["summary"].__setitem__("ok", r["summary"]["ok"] + 1),
    "environment without libtorch": lambda r: r["environment"].pop("libtorch"),
    "invented cuda driver type": lambda r: r["environment"]["gpu"].__setitem__("cuda_driver", 13),
    "unknown role": lambda r: r["cells"][0].__setitem__("role", "user"),
    "a control judged fail": lambda r: r["cells"][0].update(role="reference", verdict="fail"),
    "roles disagree with cells": lambda r: r["summary"]["by_role"].setdefault("subject", {}).__setitem__("total", 99),
}


def main() -> int:
    schema_path, report_path = sys.argv[1], sys.argv[2]
    with open(schema_path) as f:
        schema = json.load(f)
    with open(report_path) as f:
        report = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    errors = problems(schema, report)
    for e in errors[:20]:
        print(f"{report_path}: {e}")
    if errors:
        return 1
    print(f"{report_path}: valid ({len(report['cells'])} cells)")
    if "--self-test" in sys.argv[3:]:
        for name, mutate in MUTATIONS.items():
            broken = copy.deepcopy(report)
            mutate(broken)
            found = problems(schema, broken)
            if not found:
                print(f"self-test: a report with '{name}' was accepted")
                return 1
            print(f"self-test: '{name}' rejected: {found[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
