#!/usr/bin/env python3
"""Writes the compare --numerics fixtures (harness/tests/fixtures/numerics_*.json): two cells
(reproducibility, eval_mode) of the reference whose metrics.fingerprint (suites/support/fingerprint.h)
are, against numerics_base.json, identical / drifted / diverged, or absent (an older report).

  drifted:  eval_mode's losses from step 3 on 8, 40 and 90 float32 ulps off (relative <= 1e-5),
            other parameter bytes, L2 norm 2e-6 off: within 2^-10, beyond float rounding from step 3
  diverged: step 3 8 ulps off, step 4 0.4% and step 5 2% off: beyond 2^-10 from step 4

Run from the repository root: python3 harness/tests/make_numerics_fixtures.py
"""
import json
import struct


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def ulps_up(x, n):
    bits = struct.unpack("I", struct.pack("f", x))[0]
    return struct.unpack("f", struct.pack("I", bits + n))[0]


BASE = [f32(v) for v in [1.3862944, 1.3504521, 1.2931032, 1.2210433, 1.1804087, 1.0950134]]


def fingerprint(losses, sha, l2=4.181, max_abs=0.93):
    return {"format": "torchconform.fingerprint/1", "run": "fixture", "steps": len(losses),
            "loss_hex": [float.hex(v) for v in losses],
            "params": {"tensors": 6, "elements": 5236, "sha256": sha, "sum": 12.5, "sum_squares": l2 * l2,
                       "l2_norm": l2, "max_abs": max_abs, "non_finite": 0},
            "largest": []}


def cell(check, fp):
    metrics = {"steps": 6}
    if fp is not None:
        metrics["fingerprint"] = fp
    return {"check": check, "recipe": "reference", "role": "reference", "device": "cpu", "expected": "pass",
            "outcome": "pass", "verdict": "ok", "evidence": "fixture", "metrics": metrics, "duration_s": 1.0}


def report(cells):
    return {"schema": "torchconform.report/1",
            "tool": {"name": "torchconform", "version": "0.1.0", "git_commit": None},
            "run": {"started_at": "2026-12-01T00:00:00Z", "argv": ["torchconform", "run"], "seed": 1234,
                    "devices": ["cpu"]},
            "environment": {"libtorch": {"version": "2.15.0"}}, "cells": cells, "benchmarks": [],
            "summary": {"counts": {"ok": len(cells)}, "total": len(cells)}}


def main():
    a, b, c = "9f" * 32, "3c" * 32, "e1" * 32
    drift = list(BASE)
    drift[3], drift[4], drift[5] = ulps_up(drift[3], 8), ulps_up(drift[4], 40), ulps_up(drift[5], 90)
    div = list(BASE)
    div[3], div[4], div[5] = ulps_up(div[3], 8), f32(BASE[4] * 1.004), f32(BASE[5] * 1.02)
    out = {
        "numerics_base.json": [cell("reproducibility", fingerprint(BASE, a)), cell("eval_mode", fingerprint(BASE, a))],
        "numerics_drifted.json": [cell("reproducibility", fingerprint(BASE, a)),
                                  cell("eval_mode", fingerprint(drift, b, 4.181 * (1 + 2e-6)))],
        "numerics_diverged.json": [cell("reproducibility", fingerprint(BASE, a)),
                                   cell("eval_mode", fingerprint(div, c, 4.2))],
        "numerics_unrecorded.json": [cell("reproducibility", None), cell("eval_mode", None)],
    }
    for name, cells in out.items():
        with open("harness/tests/fixtures/" + name, "w") as f:
            f.write(json.dumps(report(cells), indent=1) + "\n")


if __name__ == "__main__":
    main()
