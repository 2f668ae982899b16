"""Correct Python recipes written apart from the reference, through every check, as a user runs them
(issue 39): a tabular regression without accuracy or augmentation (regression_run.py) and a causal
language model on dict batches of token ids (token_run.py). No check may fail them, report an
error, or assume the batch's layout; a check that does not apply skips naming why. Standard library
only (unittest):

    python3 python/tests/test_written_apart.py BUILD/torchconform
"""
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BINARY = None
RECIPES = {"regression_run": "regression_run.py:RegressionRun", "token_run": "token_run.py:TokenRun"}
# What may skip, and why: the multi-process checks need a recipe that trains data-parallel, which
# neither declares; torch_compile needs a recipe that ships compiled; token_run trains without
# mixed precision; grad_checkpointing needs activation checkpointing; shapes' channels_last needs
# image batches; token_run declares no initialisation.
MAY_SKIP = {"distributed", "fsdp", "torch_compile", "grad_checkpointing", "init", "amp", "shapes"}


class WrittenApart(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tc-apart-")
        # One run per recipe, the two at once: each spends much of its time waiting (data_saturation's
        # simulated device sleeps), and the cells are the same as in one run of both (each recipe's
        # cells run in their own order, from their own seed).
        def run(recipe, spec):
            report = os.path.join(cls.tmp, f"{recipe}.json")
            args = [BINARY, "run", "--device", "cpu", "--quick", "--json", report, "--html", "",
                    "--recipe", recipe, "--python", os.path.join(HERE, spec)]
            return report, subprocess.run(args, capture_output=True, text=True, timeout=3000)

        # Timing promises (a loader's wait for data, amp's speed) depend on the machine and its load
        # (CI runs beside other tests): a cell broken by them alone is not a finding about the code.
        def listing():
            out = subprocess.run([BINARY, "list", "--json"] + [a for s in RECIPES.values()
                                 for a in ("--python", os.path.join(HERE, s))], capture_output=True, text=True)
            return {(c["name"], p["id"]) for c in json.loads(out.stdout)["checks"]
                    for p in c["promises"] if p.get("timing")}

        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            runs = [pool.submit(run, recipe, spec) for recipe, spec in RECIPES.items()]
            timing = pool.submit(listing)
            cls.procs = {recipe: r.result()[1] for recipe, r in zip(RECIPES, runs)}
            reports = [r.result()[0] for r in runs]
            cls.timing = timing.result()
        cls.cells = {}
        for report in reports:
            if os.path.exists(report):
                with open(report, encoding="utf-8") as f:
                    cls.cells.update({(c["check"], c["recipe"]): c for c in json.load(f)["cells"]})
        cls.stderr = "\n".join(p.stderr[-3000:] for p in cls.procs.values())

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def timing_only(self, c):
        broken = [p["id"] for p in c["metrics"].get("promises", []) if p["status"] == "broken"]
        return c["verdict"] == "fail" and broken and all((c["check"], b) in self.timing for b in broken)

    def verdict(self, check, recipe):
        c = self.cells[(check, recipe)]
        return "ok" if self.timing_only(c) else c["verdict"]

    def test_every_cell_is_ok_or_a_named_skip(self):
        self.assertTrue(self.cells, self.stderr)
        for (check, recipe), c in sorted(self.cells.items()):
            with self.subTest(check=check, recipe=recipe):
                if c["verdict"] == "skipped":
                    self.assertIn(check, MAY_SKIP, c["evidence"])
                    self.assertTrue(c["evidence"].strip())
                else:
                    self.assertEqual(self.verdict(check, recipe), "ok", c["evidence"][:3000])
        for recipe, proc in self.procs.items():
            if not any(self.timing_only(c) for (_, r), c in self.cells.items() if r == recipe):
                self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])

    def test_the_checks_that_judge_any_task_judge_both(self):
        for recipe in RECIPES:
            for check in ("sanity", "reproducibility", "resume_equality", "eval_mode", "step_hygiene",
                          "registration", "autograd_inplace", "checkpoint_safety", "data_saturation"):
                self.assertEqual(self.verdict(check, recipe), "ok", f"{check}/{recipe}")

    def test_mixed_precision_is_judged_on_the_regression(self):
        c = self.cells[("amp", "regression_run")]
        self.assertEqual(self.verdict("amp", "regression_run"), "ok", c["evidence"][:3000])
        held = {p["id"] for p in c["metrics"]["promises"] if p["status"] == "held"}
        self.assertTrue({"parity", "fp32_master_weights", "scaler_accounting", "engagement"} <= held, held)
        self.assertIn("amp_dtypes", self.cells[("amp", "token_run")]["evidence"])

    def test_no_layout_is_assumed_and_no_randomness_invented(self):
        # The regression draws no random numbers in its loader: nothing for its workers to seed.
        c = self.cells[("data_saturation", "regression_run")]
        status = {p["id"]: p["status"] for p in c["metrics"]["promises"]}
        self.assertEqual(status["worker_augmentations"], "recorded", c["evidence"])
        self.assertIn("no random augmentation", c["evidence"])
        # The token batches (a dict of int64 ids and a bool mask) are masked at random per sample.
        c = self.cells[("data_saturation", "token_run")]
        status = {p["id"]: p["status"] for p in c["metrics"]["promises"]}
        self.assertEqual(status["worker_augmentations"], "held", c["evidence"])


if __name__ == "__main__":
    BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
