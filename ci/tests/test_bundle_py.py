#!/usr/bin/env python3
"""Unit tests of ci/gpu-bundle.d/bundle.py (the GPU bundle's helper): merge, summary, verify, the
glibc refusal of probe, checks, sweep, on small fixtures made here. Standard library only
(python-jsonschema, when installed, also validates the merged report against the committed schema).

    python3 ci/tests/test_bundle_py.py [-v]
"""
import contextlib
import copy
import hashlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCHEMA = os.path.join(ROOT, "reports", "schema", "torchconform.report-1.schema.json")

_spec = importlib.util.spec_from_file_location("bundle", os.path.join(ROOT, "ci", "gpu-bundle.d", "bundle.py"))
bundle = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bundle)


def run_quietly(fn, *args):
    """fn(*args) with stdout and stderr captured: (return value, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = fn(*args)
    return rc, out.getvalue(), err.getvalue()


def write_json(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f)


def cell(check, recipe, verdict, device="cuda", expected="pass", outcome="pass", evidence="", **metrics):
    return {"check": check, "recipe": recipe, "device": device, "expected": expected, "outcome": outcome,
            "verdict": verdict, "evidence": evidence, "metrics": metrics, "duration_s": 1.5}


def report(cells, benchmarks=(), argv=("torchconform", "run"), started="2026-12-01T10:00:00Z",
           ended="2026-12-01T10:01:00Z", gpu_devices=()):
    """A minimal report as `torchconform run --json` writes it (valid against the report schema)."""
    counts = {v: 0 for v in ("ok", "missed", "false_alarm", "fail", "error", "skipped")}
    for c in cells:
        counts[c["verdict"]] += 1
    counts["total"] = len(cells)
    return {
        "schema": "torchconform.report/1",
        "sha256": "0" * 64,
        "tool": {"name": "torchconform", "version": "0.1.0", "git_commit": "abc123"},
        "run": {"started_at": started, "ended_at": ended, "argv": list(argv), "seed": 1234, "devices": ["cuda"]},
        "environment": {
            "libtorch": {"version": "2.11.0"},
            "gpu": {"cuda_compiled": True, "cuda_available": bool(gpu_devices), "cuda_runtime": "13.0",
                    "cuda_driver": "580.1", "cudnn": "91000", "nccl": "2.27.3", "devices": list(gpu_devices)},
            "cpu": {"model": "Test CPU", "logical_cores": 2, "flags": ["avx2"]},
            "os": {}, "build": {"compiler": "g++ 12", "build_type": "Release"},
            "flags": {"deterministic_algorithms": False, "cudnn_deterministic": False, "cudnn_benchmark": False,
                      "allow_tf32_cublas": False, "allow_tf32_cudnn": True},
            "env_vars": {},
        },
        "cells": list(cells),
        "benchmarks": list(benchmarks),
        "summary": counts,
    }


class Merge(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name
        self.out = os.path.join(self.d, "run.json")
        self.a = os.path.join(self.d, "a.json")
        self.b = os.path.join(self.d, "b.json")
        write_json(self.a, report([cell("eval_mode", "reference", "ok"),
                                   cell("eval_mode", "no_eval", "ok", expected="fail", outcome="fail")],
                                  benchmarks=[{"name": "x", "device": "cuda", "unit": "ms", "samples": [1.0],
                                               "median": 1.0, "cv": 0.0}],
                                  argv=["torchconform", "run", "--check", "eval_mode"],
                                  started="2026-12-01T10:00:00Z", ended="2026-12-01T10:01:00Z"))
        write_json(self.b, report([cell("amp", "reference", "false_alarm", outcome="fail", evidence="parity"),
                                   cell("amp", "manual_half", "missed", expected="fail"),
                                   cell("amp", "mine", "fail", outcome="fail"),
                                   cell("amp", "other", "skipped", evidence="needs cuda"),
                                   cell("amp", "broken", "error", evidence="threw")],
                                  argv=["torchconform", "run", "--check", "amp"],
                                  started="2026-12-01T10:02:00Z", ended="2026-12-01T10:05:00Z"))

    def tearDown(self):
        self.tmp.cleanup()

    def merged(self, *parts):
        rc, out, _ = run_quietly(bundle.cmd_merge, self.out, list(parts))
        self.assertEqual(rc, 0, "merge should succeed; it printed: %r" % out)
        with open(self.out) as f:
            return json.load(f)

    def test_cells_and_benchmarks_concatenated_in_order(self):
        m = self.merged(self.a, self.b)
        self.assertEqual([(c["check"], c["recipe"]) for c in m["cells"]],
                         [("eval_mode", "reference"), ("eval_mode", "no_eval"), ("amp", "reference"),
                          ("amp", "manual_half"), ("amp", "mine"), ("amp", "other"), ("amp", "broken")])
        self.assertEqual([b["name"] for b in m["benchmarks"]], ["x"])

    def test_summary_recounted_from_the_cells(self):
        m = self.merged(self.a, self.b)
        self.assertEqual(m["summary"], {"ok": 2, "missed": 1, "false_alarm": 1, "fail": 1, "error": 1, "skipped": 1,
                                        "total": 7})

    def test_run_spans_the_parts_and_lists_their_command_lines(self):
        m = self.merged(self.a, self.b)
        self.assertEqual(m["run"]["started_at"], "2026-12-01T10:00:00Z")
        self.assertEqual(m["run"]["ended_at"], "2026-12-01T10:05:00Z")
        self.assertEqual(m["run"]["parts"], [["torchconform", "run", "--check", "eval_mode"],
                                             ["torchconform", "run", "--check", "amp"]])

    def test_sha256_dropped_tool_and_environment_from_the_first(self):
        m = self.merged(self.a, self.b)
        self.assertNotIn("sha256", m, "the merged content differs from the first part's: its hash must go")
        with open(self.a) as f:
            first = json.load(f)
        self.assertEqual(m["tool"], first["tool"])
        self.assertEqual(m["environment"], first["environment"])
        self.assertEqual(m["schema"], "torchconform.report/1")

    def test_unreadable_parts_are_left_out(self):
        bad = os.path.join(self.d, "bad.json")
        with open(bad, "w") as f:
            f.write("{not json")
        m = self.merged(os.path.join(self.d, "absent.json"), bad, self.b)
        self.assertEqual(m["summary"]["total"], 5)
        self.assertEqual(m["run"]["parts"], [["torchconform", "run", "--check", "amp"]])

    def test_no_readable_part_fails_and_writes_nothing(self):
        rc, out, _ = run_quietly(bundle.cmd_merge, self.out, [os.path.join(self.d, "absent.json")])
        self.assertEqual(rc, 1)
        self.assertIn("no per-check report to merge", out)
        self.assertFalse(os.path.exists(self.out))

    def test_merging_again_replaces_the_file_and_leaves_no_temporary(self):
        self.merged(self.a)
        m = self.merged(self.a, self.b)
        self.assertEqual(m["summary"]["total"], 7)
        self.assertEqual(sorted(os.listdir(self.d)), ["a.json", "b.json", "run.json"])

    def test_a_single_part_is_kept_as_it_was(self):
        m = self.merged(self.a)
        with open(self.a) as f:
            first = json.load(f)
        first.pop("sha256")
        first["run"]["parts"] = [first["run"]["argv"]]
        self.assertEqual(m, first)

    def test_merged_report_is_valid_against_the_schema(self):
        try:
            import jsonschema
        except ImportError:
            self.skipTest("python-jsonschema is not installed here")
        with open(SCHEMA) as f:
            schema = json.load(f)
        m = self.merged(self.a, self.b)
        # The fail cell is a subject's (the schema requires its role); the others are controls.
        for c in m["cells"]:
            c["role"] = "subject" if c["verdict"] == "fail" else ("reference" if c["expected"] == "pass" else "variant")
        errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(m)]
        self.assertEqual(errors, [])


class Summary(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "out")
        self.state = os.path.join(self.tmp.name, "state")
        self.bundle = os.path.join(self.tmp.name, "bundle")
        for d in (self.out, self.state, self.bundle):
            os.mkdir(d)
        write_json(os.path.join(self.bundle, "MANIFEST.json"),
                   {"git_commit": "deadbeef", "torch_version": "2.11.0+cu130", "cuda_version": "13.0", "files": {}})

    def tearDown(self):
        self.tmp.cleanup()

    def state_file(self, name, text):
        with open(os.path.join(self.state, name), "w") as f:
            f.write(text)

    def summary(self):
        rc, out, err = run_quietly(bundle.cmd_summary, self.out, self.state, self.bundle)
        self.assertEqual(rc, 0, "summary should succeed: %r %r" % (out, err))
        self.assertEqual(sorted(os.listdir(self.out))[-1], "summary.txt")
        self.assertNotIn(".summary.txt.tmp", os.listdir(self.out))
        with open(os.path.join(self.out, "summary.txt")) as f:
            return f.read()

    def test_a_finished_run(self):
        self.state_file("mode", "quick 180\n")
        self.state_file("verdict", "NOT OK (exit 1): 1 cell(s) missed / false_alarm / error\n")
        self.state_file("driver", "580.65.06\n")
        write_json(os.path.join(self.state, "probe.json"), {
            "python": "/usr/bin/python3", "python_version": "3.12.3", "glibc": "2.39",
            "torch_version": "2.11.0+cu130", "cuda_version": "13.0", "cudnn": 91002, "nccl": "2.27.3",
            "device_count": 2,
            "devices": [{"index": 0, "name": "NVIDIA H200", "memory_bytes": 150 * 2**30, "sms": 132, "capability": "9.0"},
                        {"index": 1, "name": "NVIDIA H200", "memory_bytes": 150 * 2**30, "sms": 132, "capability": "9.0"}]})
        self.state_file("steps.tsv", "preflight\tok\t4\t-\t0\tbundle intact\n"
                                     "run:eval_mode\tdone\t12\t30\t0\t\n"
                                     "run:amp\ttimeout\t30\t30\t124\tran out of its 30 s\n"
                                     "a line with too few fields\n")
        long_evidence = "e" * 2000
        write_json(os.path.join(self.out, "run.json"), report([
            cell("eval_mode", "reference", "ok"),
            cell("eval_mode", "no_eval", "ok", expected="fail", outcome="fail"),
            cell("distributed", "reference", "false_alarm", outcome="fail", evidence=long_evidence,
                 device_label="cuda\u00d72"),
            cell("amp", "manual_half", "skipped", evidence="needs a GPU with bf16")]))
        write_json(os.path.join(self.out, "bench.json"), report([], benchmarks=[
            {"name": "amp/train_step/bf16", "device": "cuda", "unit": "ms", "samples": [1.0, 1.2], "median": 1.1,
             "cv": 0.05}]))
        write_json(os.path.join(self.out, "allreduce.json"), {"benchmarks": [
            {"name": "allreduce/1M_mean", "run_name": "allreduce/1M", "aggregate_name": "mean", "algbw_GBps": 9.0},
            {"name": "allreduce/1M_median", "run_name": "allreduce/1M", "aggregate_name": "median",
             "algbw_GBps": 10.5, "busbw_GBps": 10.5, "wrong": 0},
            {"name": "allreduce/1M", "run_name": "allreduce/1M", "algbw_GBps": 1.0}]})
        text = self.summary()
        lines = text.splitlines()
        self.assertEqual(lines[0], "torchconform GPU bundle run")
        self.assertIn("Result: NOT OK (exit 1): 1 cell(s) missed / false_alarm / error", lines)
        self.assertIn("Bundle: git deadbeef, built against torch 2.11.0+cu130 (CUDA 13.0)", lines)
        self.assertIn("Mode: --quick (whole-run budget 180 s)", lines)
        self.assertIn("  GPU 0: NVIDIA H200, 150.0 GiB, 132 SMs, compute capability 9.0", lines)
        self.assertIn("  GPU 1: NVIDIA H200, 150.0 GiB, 132 SMs, compute capability 9.0", lines)
        self.assertIn("  driver: 580.65.06", lines)
        self.assertIn("  torch: 2.11.0+cu130 (/usr/bin/python3), python 3.12.3, glibc 2.39", lines)
        self.assertIn("  libstdc++: the machine's own", lines)
        # Steps: name, status, wall / budget, exit, note; the malformed line is left out.
        self.assertIn("  preflight                    ok             4.0 s /    - s  exit 0 - bundle intact", lines)
        self.assertIn("  run:amp                      timeout       30.0 s /   30 s  exit 124 - ran out of its 30 s",
                      lines)
        self.assertNotIn("too few", text)
        self.assertIn("Matrix (run.json): total 4, ok 2, missed 0, false_alarm 1, error 0, skipped 1", lines)
        self.assertIn("  eval_mode            ok 2", lines)
        self.assertIn("Cells not ok (missed / false_alarm / fail / error): 1", lines)
        self.assertIn("  FALSE_ALARM  distributed x reference on cuda\u00d72: expected pass, outcome fail", lines)
        self.assertIn("      " + "e" * 1500 + " [... 500 more characters]", lines)
        self.assertIn("Cells skipped: 1", lines)
        self.assertIn("  amp x manual_half on cuda: needs a GPU with bf16", lines)
        self.assertTrue(any(l.startswith("  amp/train_step/bf16") and "1.1 ms [0.050]" in l for l in lines), text)
        ar = [l for l in lines if l.startswith("  allreduce/")]
        self.assertEqual(len(ar), 1, "only the median aggregate is listed: %s" % ar)
        self.assertIn("algbw    10.50 GB/s  busbw    10.50 GB/s  wrong 0", ar[0])
        self.assertNotIn("TEST HOOK", text)

    def test_an_interrupted_run_names_its_step(self):
        self.state_file("mode", "full 480\n")
        self.state_file("steps.tsv", "preflight\tok\t3\t-\t0\t\n")
        self.state_file("current", "run:distributed\t42\n")
        text = self.summary()
        self.assertIn("Result: run.sh did not finish (interrupted or killed): see the steps below", text)
        self.assertIn("Mode: full (whole-run budget 480 s)", text)
        self.assertIn("  run:distributed              INTERRUPTED or still running when this was written (started at 42 s)",
                      text.splitlines())

    def test_a_refusal_before_anything_ran(self):
        os.remove(os.path.join(self.bundle, "MANIFEST.json"))  # a damaged bundle: no manifest
        self.state_file("mode", "quick 180\n")
        self.state_file("verdict", "REFUSED (exit 2): bundle is damaged\n")
        self.state_file("steps.tsv", "preflight\trefused\t0\t-\t2\tbundle is damaged\n")
        text = self.summary()
        self.assertIn("Result: REFUSED (exit 2): bundle is damaged", text)
        self.assertIn("Bundle: git None, built against torch None (CUDA None)", text)
        self.assertIn("  GPU: no CUDA device", text)
        self.assertIn("  driver: unknown (no nvidia-smi)", text)
        self.assertIn("Matrix: no run.json (no run step finished)", text)
        self.assertNotIn("Benchmarks", text)
        self.assertNotIn("All-reduce", text)

    def test_test_hook_and_libstdcxx_fallback_are_said(self):
        self.state_file("test_hook", "TEST HOOK TC_BUNDLE_TEST_DEVICE=cpu: every step ran on the CPU\n")
        self.state_file("cxx_fallback", "/x/lib:/x/lib/cxx\n")
        lines = self.summary().splitlines()
        self.assertEqual(lines[3], "TEST HOOK TC_BUNDLE_TEST_DEVICE=cpu: every step ran on the CPU",
                         "the hook is said before the result")
        self.assertIn("  libstdc++: the bundle's lib/cxx/ (the machine's lacks a version the binaries need)", lines)

    def test_gpus_from_the_report_when_the_probe_has_none(self):
        write_json(os.path.join(self.out, "run.json"), report(
            [cell("eval_mode", "reference", "ok")],
            gpu_devices=[{"index": 0, "name": "NVIDIA A100", "memory_bytes": 40 * 2**30, "sms": 108}]))
        lines = self.summary().splitlines()
        self.assertIn("  GPU 0: NVIDIA A100, 40.0 GiB, 108 SMs, compute capability ?", lines)
        self.assertIn("  driver: 580.1", lines)


class Verify(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.b = self.tmp.name
        os.mkdir(os.path.join(self.b, "bin"))
        files = {}
        for rel, data in (("bin/tool", b"\x7fELF fake"), ("run.sh", b"#!/bin/sh\n")):
            with open(os.path.join(self.b, rel), "wb") as f:
                f.write(data)
            files[rel] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        self.manifest = {"torch_version": "2.11.0", "cuda_version": "13.0", "files": files}
        write_json(os.path.join(self.b, "MANIFEST.json"), self.manifest)

    def tearDown(self):
        self.tmp.cleanup()

    def test_intact(self):
        self.assertEqual(run_quietly(bundle.cmd_verify, self.b)[:2], (0, ""))

    def test_changed_missing_and_unreadable_manifest(self):
        with open(os.path.join(self.b, "bin/tool"), "wb") as f:
            f.write(b"\x7fELF fakf")  # same size, another hash
        os.remove(os.path.join(self.b, "run.sh"))
        rc, out, _ = run_quietly(bundle.cmd_verify, self.b)
        self.assertEqual(rc, 2)
        self.assertIn("bundle is damaged (copy it again):", out)
        self.assertIn("bin/tool: size or sha256 differs from MANIFEST.json", out)
        self.assertIn("run.sh: No such file or directory", out)
        with open(os.path.join(self.b, "MANIFEST.json"), "w") as f:
            f.write("{")
        rc, out, _ = run_quietly(bundle.cmd_verify, self.b)
        self.assertEqual(rc, 2)
        self.assertIn("bundle is damaged: MANIFEST.json unreadable", out)

    def test_probe_refuses_an_old_glibc_before_importing_torch(self):
        m = dict(self.manifest, requires_glibc="99.1")
        write_json(os.path.join(self.b, "MANIFEST.json"), m)
        rc, out, err = run_quietly(bundle.cmd_probe, self.b)
        self.assertEqual(rc, 2)
        self.assertRegex(err, r"^refused: the bundle's binaries need glibc >= 99\.1, this machine has [0-9.]+\n$")
        self.assertEqual(out, "")

    def test_version_tuple(self):
        self.assertLess(bundle.version_tuple("2.9"), bundle.version_tuple("2.34"))
        self.assertEqual(bundle.version_tuple("2.35+ubuntu"), (2, 35))


class Other(unittest.TestCase):
    def test_checks_prints_the_names(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"checks": [{"name": "eval_mode"}, "amp"]}, f)
        try:
            rc, out, _ = run_quietly(bundle.cmd_checks, f.name)
        finally:
            os.remove(f.name)
        self.assertEqual((rc, out), (0, "eval_mode\namp\n"))

    def test_unknown_or_missing_command_is_refused(self):
        self.assertEqual(run_quietly(bundle.main, ["bundle.py", "frobnicate"])[0], 2)
        self.assertEqual(run_quietly(bundle.main, ["bundle.py"])[0], 2)

    def test_sweep_kills_only_the_processes_with_the_marker(self):
        marker = "TC_GPU_BUNDLE_RUN=test.%d.%d" % (os.getpid(), time.monotonic_ns())
        k, v = marker.split("=", 1)
        marked = subprocess.Popen(["sleep", "60"], env=dict(os.environ, **{k: v}))
        other = subprocess.Popen(["sleep", "60"], env=dict(os.environ, **{k: v + "0"}))
        try:
            time.sleep(0.2)  # let exec finish, so /proc/PID/environ is sleep's
            rc, out, _ = run_quietly(bundle.cmd_sweep, marker)
            self.assertEqual(rc, 0)
            self.assertEqual(out, "killed leftover process(es) %d\n" % marked.pid)
            self.assertEqual(marked.wait(timeout=10), -9)
            self.assertIsNone(other.poll(), "a process with another marker value must survive")
            self.assertEqual(run_quietly(bundle.cmd_sweep, marker)[1], "", "nothing left to kill: nothing said")
        finally:
            for p in (marked, other):
                if p.poll() is None:
                    p.kill()
                    p.wait()


if __name__ == "__main__":
    unittest.main()
