"""Which gradient the step used, in a user's own Python loop (issue 40): gradient accumulation over
uneven micro-batches, correct and with the losses undivided (accumulation_run.py), and PyTorch's
default initialisation declared with torchconform.default_init. Standard library only (unittest):

    python3 python/tests/test_accumulation.py BUILD/torchconform
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BINARY = None
CHECKS = ("step_hygiene", "init", "autograd_inplace", "resume_equality")


def promise(cell, pid):
    for p in cell["metrics"].get("promises", []):
        if p["id"] == pid:
            return p
    return {}


class Accumulation(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tc-accumulation-")
        report = os.path.join(cls.tmp, "report.json")
        args = [BINARY, "run", "--device", "cpu", "--json", report, "--html", "", "--check", ",".join(CHECKS),
                "--recipe", "accumulation_run,undivided_accumulation_run",
                "--python", os.path.join(HERE, "accumulation_run.py")]
        cls.proc = subprocess.run(args, capture_output=True, text=True, timeout=1200)
        cls.cells = {}
        if os.path.exists(report):
            with open(report, encoding="utf-8") as f:
                cls.cells = {(c["check"], c["recipe"]): c for c in json.load(f)["cells"]}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_correct_accumulation_passes_every_check(self):
        self.assertTrue(self.cells, self.proc.stdout[-2000:] + self.proc.stderr[-3000:])
        for check in CHECKS:
            c = self.cells[(check, "accumulation_run")]
            with self.subTest(check=check):
                self.assertEqual(c["verdict"], "ok", c["evidence"][:3000])
                self.assertEqual(c["outcome"], "pass", c["evidence"][:3000])
        sh = self.cells[("step_hygiene", "accumulation_run")]
        self.assertEqual(promise(sh, "batch_gradient").get("status"), "held", sh["evidence"][:3000])
        self.assertAlmostEqual(sh["metrics"]["batch_gradient"]["scale"], 1.0, delta=1e-6)
        self.assertEqual(sh["metrics"]["batch_gradient"]["split"], [6, 6, 4])
        print("step_hygiene / accumulation_run:", sh["evidence"][:1500])

    def test_default_init_is_judged(self):
        c = self.cells[("init", "accumulation_run")]
        self.assertEqual(c["verdict"], "ok", c["evidence"][:3000])
        self.assertIn("follow their declared initialisation", c["evidence"])

    def test_undivided_losses_are_caught_with_the_cause(self):
        c = self.cells[("step_hygiene", "undivided_accumulation_run")]
        print("step_hygiene / undivided_accumulation_run:", c["evidence"][:1500])
        self.assertEqual(c["outcome"], "fail", c["evidence"][:3000])
        self.assertEqual(promise(c, "batch_gradient").get("status"), "broken", c["evidence"][:3000])
        self.assertIn("backpropagated undivided", c["evidence"])
        self.assertAlmostEqual(c["metrics"]["batch_gradient"]["scale"], 3.0, delta=0.5)
        # No other check blames it for something else.
        for check in ("autograd_inplace", "resume_equality", "init"):
            self.assertNotEqual(self.cells[(check, "undivided_accumulation_run")]["outcome"], "fail", check)


if __name__ == "__main__":
    BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main()
