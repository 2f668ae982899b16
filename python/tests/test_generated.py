"""The Python generator of correct recipes and its mutants (issue 44; python/reference/generated.py):

- a seed names the same choices as the C++ generator's (``torchconform list --recipe gen-A..B``);
- ``generated.py:pygen_N`` and ``generated.py:pygen_N__OPERATOR`` load through ``--python`` (the
  module's ``__getattr__``); an equivalent or unknown mutant is refused, saying why;
- draws pass their checks (a failing cell is a false alarm) and mutants are caught by one of the
  promises their operator declares.

Cheap by default (CTest ``python.generated``, 25 s alone on a 2-core machine, its runs two at a time): one draw under
eval_mode and step_hygiene, one mutant under each of the five checks the operators aim at. With
``TC_GENERATED_FULL=1`` (CTest ``python.generated_full``, label slow, about 6 minutes): two draws under
the five checks and one mutant of every operator, each on a draw where it applies (not timed as one
run; its cells took about 6 minutes in the sweep).

    python3 python/tests/test_generated.py build/torchconform          # or: pytest python/tests/test_generated.py
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
ROOT = os.path.dirname(os.path.dirname(HERE))
GENERATED = os.path.join(ROOT, "python", "reference", "generated.py")
sys.path[:0] = [os.path.join(ROOT, "python", "reference")]
BINARY = os.environ.get("TORCHCONFORM_BINARY", os.path.join(ROOT, "build", "torchconform"))
FULL = os.environ.get("TC_GENERATED_FULL") == "1"
QUICK_CHECKS = ("step_hygiene", "resume_equality", "eval_mode", "checkpoint_safety", "reproducibility")

# (recipe, checks): the correct draws. pygen_2: SGD, warm-up + cosine, BatchNorm frozen, first layer
# frozen, an EMA kept, flat keys, label smoothing, no augmentation; pygen_1: SGD, StepLR per epoch,
# 3 micro-batches, the workers' augmentation. pygen_6 (Adam; a bias in front of BatchNorm, whose
# zero true gradient Adam turns into lr-sized steps of rounding noise) under torch_compile: the
# sweep's false alarm, judged since by the first step's gradient (docs/generated.md).
DRAWS = ([("pygen_1", QUICK_CHECKS), ("pygen_2", QUICK_CHECKS), ("pygen_6", ("torch_compile",))] if FULL else
         [("pygen_2", ("eval_mode", "step_hygiene"))])
# The mutants: one of every operator in the full run (pygen_2 where it applies; pygen_1 for the
# micro-batches and the workers' augmentation; pygen_7 for an evaluated EMA), one per check here.
CHEAP_MUTANTS = ("pygen_2__eval_without_eval", "pygen_1__undivided_accumulation", "pygen_2__prefixed_save",
                 "pygen_2__no_scheduler_state", "pygen_1__unseeded_augmentation")
FULL_MUTANTS = ("pygen_2__drop_zero_grad", "pygen_1__zero_grad_in_micro_loop", "pygen_1__undivided_accumulation",
                "pygen_2__clip_after_step", "pygen_2__clip_subset", "pygen_2__no_optimizer_state",
                "pygen_2__no_scheduler_state", "pygen_2__no_rng_state", "pygen_2__no_sampler_state", "pygen_7__no_ema_state",
                "pygen_2__no_scaler_state", "pygen_2__lenient_load",
                "pygen_2__eval_without_eval", "pygen_2__eval_without_no_grad", "pygen_2__no_train_after_eval",
                "pygen_2__non_atomic_save", "pygen_2__prefixed_save", "pygen_2__no_seed",
                "pygen_1__unseeded_augmentation")
MUTANTS = FULL_MUTANTS if FULL else CHEAP_MUTANTS


def _tables():
    """generated.py's tables without torch: the part above its recipes, run as its own module."""
    with open(GENERATED, encoding="utf-8") as f:
        source = f.read().split('\nif __name__ == "__main__":', 1)[0]
    namespace = {"__name__": "generated_tables", "__file__": GENERATED}
    exec(compile(source, GENERATED, "exec"), namespace)  # noqa: S102 - the repository's own file
    return namespace


class Tables(unittest.TestCase):
    def test_a_seed_names_the_cpp_draw(self):
        t = _tables()
        seeds = list(range(1, 41)) + [1000, 12345678901234567]
        spec = ",".join(f"gen-{s}" for s in seeds)
        out = subprocess.run([BINARY, "list", "--json", "--recipe", spec], capture_output=True, text=True,
                             timeout=120, check=True).stdout
        cpp = {r["name"]: r["description"] for r in json.loads(out)["recipes"] if r["name"].startswith("gen-")}
        for s in seeds:
            d = t["Draw"](s)
            with self.subTest(seed=s):
                self.assertTrue(cpp[f"gen-{s}"].startswith(f"generated draw: {d.describe()}. Mutants: "), cpp[f"gen-{s}"])

    def test_operators_mirror_cpp(self):
        t = _tables()
        out = subprocess.run([BINARY, "list", "--json", "--recipe", "gen-1..8-*"], capture_output=True, text=True,
                             timeout=120, check=True).stdout
        cpp = {}
        for r in json.loads(out)["recipes"]:
            if r["name"].startswith("gen-"):
                cpp.setdefault(r["name"].split("-", 2)[2], r["breaks"])
        # The same operators (none unmirrored, none Python-only), each aimed the same way.
        self.assertEqual(sorted(cpp), sorted(op.name for op in t["OPERATORS"]))
        for op in t["OPERATORS"]:
            with self.subTest(op=op.name):
                self.assertEqual(cpp[op.name], {op.check: list(op.promises)})

    def test_describe_runs_without_torch(self):
        out = subprocess.run(["python3", GENERATED, "describe", "17"], capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("pygen_17: optimizer=", out.stdout)
        self.assertIn("equivalent here, left out:", out.stdout)


class Loading(unittest.TestCase):
    """The names (the draws and mutants themselves load in Cells, through `run --python`)."""

    def test_names(self):
        t = _tables()
        d, op = t["parse_name"]("pygen_17__drop_zero_grad")
        self.assertEqual((d.seed, op.name), (17, "drop_zero_grad"))
        self.assertIsNone(t["parse_name"]("PythonReference"))
        with self.assertRaisesRegex(ValueError, "no mutation operator"):
            t["parse_name"]("pygen_17__no_such_operator")

    def test_equivalent_mutant_is_refused_with_the_reason(self):
        # Draw 17 keeps an EMA that nothing reads: the loader's getattr gets the generator's reason.
        out = subprocess.run([BINARY, "list", "--python", f"{GENERATED}:pygen_17__no_ema_state"], capture_output=True,
                             text=True, timeout=120)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("equivalent to its draw by construction (the EMA is kept but nothing reads it", out.stderr)


def promise(cell, pid):
    for p in (cell.get("metrics") or {}).get("promises", []):
        if p.get("id") == pid:
            return p.get("status")
    return None


class Cells(unittest.TestCase):
    """Draws pass; each mutant is caught by a promise its operator declares."""

    @classmethod
    def setUpClass(cls):
        t = _tables()
        cls.declared = {}
        for name in MUTANTS:
            seed, op = name[len("pygen_"):].split("__")
            o = t["OPERATORS_BY_NAME"][op]
            assert not o.equivalent_on(t["Draw"](int(seed))), name
            cls.declared[name] = (o.check, o.promises)
        cls.tmp = tempfile.mkdtemp(prefix="tc-pygen-")
        cls.cells = {}
        # One run per check: its draws and its mutants (each recipe in a process of its own), two runs
        # at a time (a run spends part of its time starting processes and waiting on them; none of
        # the cheap run's checks has a timing promise). The full run's torch_compile cell has one
        # (compiled_not_slower): there, one run at a time.
        checks = sorted({c for _, cs in DRAWS for c in cs} | {c for c, _ in cls.declared.values()})

        def run(check):
            names = [d for d, cs in DRAWS if check in cs] + [m for m, (c, _) in cls.declared.items() if c == check]
            report = os.path.join(cls.tmp, f"{check}.json")
            args = [BINARY, "run", "--device", "cpu", "--quick", "--check", check, "--json", report, "--html", "",
                    "--recipe", ",".join(names)]
            for n in names:
                args += ["--python", f"{GENERATED}:{n}"]
            return report, subprocess.run(args, capture_output=True, text=True, timeout=1500)

        cls.logs = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=1 if FULL else 2) as pool:
            for report, proc in pool.map(run, checks):
                cls.logs.append(proc.stdout[-3000:] + proc.stderr[-2000:])
                if os.path.exists(report):
                    with open(report, encoding="utf-8") as f:
                        for c in json.load(f)["cells"]:
                            cls.cells[(c["check"], c["recipe"])] = c

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_draws_pass(self):
        for name, checks in DRAWS:
            for check in checks:
                with self.subTest(recipe=name, check=check):
                    c = self.cells.get((check, name))
                    self.assertIsNotNone(c, "\n".join(self.logs))
                    self.assertEqual(c["verdict"], "ok", c["evidence"][:3000])
                    self.assertEqual(c["outcome"], "pass", c["evidence"][:3000])
                    self.assertEqual(c.get("language"), "python")

    def test_mutants_are_caught_by_their_promise(self):
        for name, (check, promises) in self.declared.items():
            with self.subTest(recipe=name, check=check):
                c = self.cells.get((check, name))
                self.assertIsNotNone(c, "\n".join(self.logs))
                self.assertEqual(c["verdict"], "ok", c["evidence"][:3000])  # a variant caught
                broken = [p for p in promises if promise(c, p) == "broken"]
                self.assertTrue(broken, f"none of {promises} broken: {c['evidence'][:3000]}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
