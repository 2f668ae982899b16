#!/usr/bin/env python3
"""Unit tests of ci/failure-digest on JUnit files made here: a GoogleTest assertion in a long
output is named with its file:line and values, a teeth cell's broken rules and a pytest failure are
named, a passing run prints nothing, an output with no recognised line gives its tail, the limit
holds, and an unreadable file exits 2. Standard library only.

    python3 ci/tests/test_failure_digest.py [-v]
"""
import os
import subprocess
import sys
import tempfile
import unittest
from xml.sax.saxutils import escape

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(os.path.dirname(HERE), "failure-digest")

GTEST = "\n".join(
    ["[ RUN      ] WrittenDifferently.A"]
    + [f"evidence line {i}: held" for i in range(500)]
    + ["/src/suites/tests/x_test.cpp:42: Failure",
       "Expected: (p.value(\"status\", \"\")) != (\"broken\"), actual: \"broken\" vs \"broken\"",
       "data_saturation / r: worker_augmentations: two runs differ",
       "[  FAILED  ] WrittenDifferently.A (10 ms)"]
    + [f"later line {i}" for i in range(200)]
    + ["[  FAILED  ] 1 test, listed below:"])
TEETH = "\n".join(["[teeth] cpu/amp/x: caught by ['parity']",
                   "teeth_cell: 1 rule(s) broken:",
                   "  - cpu/amp/py_half_model: declares it breaks ['fp32_master_weights'], which held"])
PYTEST = "\n".join(["test_loop.py::T::a PASSED", "E   AssertionError: 3 != 4",
                    "FAILED test_loop.py::ForgetsEval::eval_mode[cpu]"])
QUIET = "\n".join(f"step {i}" for i in range(100))


def junit(cases):
    rows = []
    for name, status, out in cases:
        fail = '<failure message="Failed"/>' if status == "fail" else ""
        rows.append(f'<testcase name="{name}" classname="{name}" time="12.5" status="{status}">{fail}'
                    f"<system-out>{escape(out)}</system-out></testcase>")
    return '<?xml version="1.0" encoding="UTF-8"?>\n<testsuite>' + "".join(rows) + "</testsuite>\n"


class FailureDigest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="tc-failure-digest-")
        self.addCleanup(self.dir.cleanup)

    def run_on(self, text, *extra):
        path = os.path.join(self.dir.name, "junit.xml")
        with open(path, "w") as f:
            f.write(text)
        return subprocess.run([sys.executable, SCRIPT, "--junit", path, *extra], capture_output=True, text=True)

    def test_names_the_assertion_in_a_long_output(self):
        r = self.run_on(junit([("check/WrittenDifferently.*", "fail", GTEST), ("ok_test", "run", "fine")]))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("1 test(s) failed", r.stdout)
        self.assertIn("--- check/WrittenDifferently.* (12.5 s)", r.stdout)
        self.assertIn("x_test.cpp:42: Failure", r.stdout)
        self.assertIn("worker_augmentations: two runs differ", r.stdout)
        self.assertIn("[  FAILED  ] WrittenDifferently.A", r.stdout)
        self.assertNotIn("evidence line 7", r.stdout)
        self.assertNotIn("ok_test", r.stdout)

    def test_names_teeth_rules_and_pytest_failures(self):
        r = self.run_on(junit([("conformance.python.cpu.amp", "fail", TEETH), ("python.loop", "fail", PYTEST)]))
        self.assertIn("2 test(s) failed", r.stdout)
        self.assertIn("declares it breaks ['fp32_master_weights'], which held", r.stdout)
        self.assertIn("E   AssertionError: 3 != 4", r.stdout)
        self.assertIn("FAILED test_loop.py::ForgetsEval::eval_mode[cpu]", r.stdout)
        self.assertNotIn("PASSED", r.stdout)

    def test_nothing_failed_prints_nothing(self):
        r = self.run_on(junit([("a", "run", GTEST)]))
        self.assertEqual((r.returncode, r.stdout), (0, ""))

    def test_unrecognised_output_gives_its_tail(self):
        r = self.run_on(junit([("quiet", "fail", QUIET)]))
        self.assertIn("no failure line recognised", r.stdout)
        self.assertIn("step 99", r.stdout)
        self.assertNotIn("step 50\n", r.stdout)

    def test_limit(self):
        many = "\n".join(f"[  FAILED  ] T.case{i}" for i in range(30))
        r = self.run_on(junit([("t", "fail", many)]), "--lines", "5")
        self.assertIn("T.case4", r.stdout)
        self.assertNotIn("T.case5", r.stdout)
        self.assertIn("25 more line(s)", r.stdout)

    def test_unreadable_file(self):
        r = self.run_on("<testsuite><testcase")
        self.assertEqual(r.returncode, 2)
        self.assertIn("cannot read", r.stderr)


if __name__ == "__main__":
    unittest.main()
