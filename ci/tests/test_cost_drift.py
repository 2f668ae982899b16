#!/usr/bin/env python3
"""Unit tests of ci/cost-drift on small fixtures made here: the drift report (over 2x, under half,
no recorded cost), `--strict`, and `--write`, which records every test that ran, keeps the figure of
one that did not run while the build still registers it, and drops one the build no longer has
(a fake build directory whose CTestTestfile.cmake registers two tests). Standard library only.

    python3 ci/tests/test_cost_drift.py [-v]
"""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(os.path.dirname(HERE), "cost-drift")

JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite tests="3">
  <testcase name="steady" classname="steady" time="10.0" status="run"/>
  <testcase name="slower" classname="slower" time="25.0" status="run"/>
  <testcase name="skipped_one" classname="skipped_one" time="0.1" status="notrun"><skipped/></testcase>
</testsuite>
"""


class CostDrift(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="tc-cost-drift-")
        self.build = os.path.join(self.dir.name, "build")
        os.makedirs(os.path.join(self.build, "Testing"))
        # Registered: steady, slower, slow_tier (not in this run); gone_test is not.
        with open(os.path.join(self.build, "CTestTestfile.cmake"), "w") as f:
            for name in ("steady", "slower", "slow_tier", "skipped_one"):
                f.write(f"add_test({name} true)\n")
        self.junit = os.path.join(self.build, "Testing", "junit.xml")
        with open(self.junit, "w") as f:
            f.write(JUNIT)
        self.costs = os.path.join(self.dir.name, "costs.txt")
        with open(self.costs, "w") as f:
            f.write("# header\nsteady 1 9.00\nslower 1 10.00\nslow_tier 1 300.00\ngone_test 1 7.00\n---\n")

    def tearDown(self):
        self.dir.cleanup()

    def run_script(self, *args):
        return subprocess.run([sys.executable, SCRIPT, "--junit", self.junit, "--costs", self.costs, *args],
                              capture_output=True, text=True)

    def read_costs(self):
        with open(self.costs) as f:
            lines = [l.split() for l in f if l.strip() and not l.startswith("#") and l.strip() != "---"]
        return {l[0]: float(l[2]) for l in lines}

    def test_reports_drift_and_strict_fails_on_it(self):
        p = self.run_script()
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("slower: recorded 10.0 s, this run 25.0 s (2.50x)", p.stdout)
        self.assertNotIn("steady:", p.stdout)
        self.assertNotIn("skipped_one", p.stdout)
        self.assertEqual(self.run_script("--strict").returncode, 1)

    def test_write_keeps_registered_and_drops_gone_tests(self):
        p = self.run_script("--write")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("dropped 1 tests", p.stdout)
        self.assertEqual(self.read_costs(), {"steady": 10.0, "slower": 25.0, "slow_tier": 300.0})
        with open(self.costs) as f:
            self.assertTrue(f.read().endswith("---\n"))

    def test_write_keeps_everything_when_the_build_cannot_be_listed(self):
        p = self.run_script("--write", "--build", os.path.join(self.dir.name, "no-such-build"))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("every recorded cost kept", p.stdout)
        self.assertIn("gone_test", self.read_costs())


if __name__ == "__main__":
    unittest.main()
