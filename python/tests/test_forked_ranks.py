"""torchrun ranks forked from the run's template (harness/rank_server.h) against ranks started by exec:
the same distributed cell on the Python reference (python/tests/rank_probe.py), once each way, and
what each rank saw. Standard library only (unittest):

    python3 python/tests/test_forked_ranks.py BUILD/torchconform
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
RUNS = {}


def start(mode, root):
    out = os.path.join(root, mode)
    os.makedirs(out)
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "RANK", "WORLD_SIZE")}
    env["PROBE_DIR"] = out
    args = [BINARY, "run", "--device", "cpu", "--check", "distributed", "--recipe", "py_rank_probe", "--quick",
            "--python", os.path.join(HERE, "rank_probe.py") + ":RankProbe", "--recipe-processes", mode,
            "--json", os.path.join(out, "report.json"), "--html", ""]
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True), out


def setUpModule():
    root = tempfile.mkdtemp(prefix="tc-forked-ranks-")
    RUNS["root"] = root
    started = {mode: start(mode, root) for mode in ("fork", "exec")}  # at once: each mostly waits
    for mode, (proc, out) in started.items():
        log, _ = proc.communicate(timeout=600)
        with open(os.path.join(out, "report.json"), encoding="utf-8") as f:
            cell = json.load(f)["cells"][0]
        ranks = {}
        for r in ("0", "1"):
            with open(os.path.join(out, f"rank-{r}.json"), encoding="utf-8") as f:
                ranks[r] = json.load(f)
        RUNS[mode] = {"rc": proc.returncode, "log": log, "cell": cell, "ranks": ranks}


def tearDownModule():
    shutil.rmtree(RUNS.get("root", ""), ignore_errors=True)


class ForkedRanks(unittest.TestCase):
    def test_both_ways_the_cell_is_ok_and_says_how_its_ranks_started(self):
        for mode in ("fork", "exec"):
            run = RUNS[mode]
            self.assertEqual(run["rc"], 0, run["log"][-3000:])
            self.assertEqual(run["cell"]["verdict"], "ok", run["cell"]["evidence"])
            self.assertEqual(run["cell"]["metrics"]["ranks_started_by"], mode)

    def test_the_recipe_module_is_imported_in_each_rank_under_torchrun(self):
        # A forked rank's template loaded no recipe file: the module's own code ran in the rank,
        # after torchrun set RANK (a team's script reading it at module level sees its own rank).
        for mode in ("fork", "exec"):
            for r, seen in RUNS[mode]["ranks"].items():
                self.assertTrue(seen["imported_here"], (mode, r))
                self.assertEqual(seen["rank_at_import"], r, (mode, seen))

    def test_a_forked_rank_sees_torchruns_environment_as_a_rank_started_by_exec(self):
        for mode in ("fork", "exec"):
            ranks = RUNS[mode]["ranks"]
            self.assertEqual(ranks["0"]["local_rank"], "0")
            self.assertEqual(ranks["1"]["local_rank"], "1")
            self.assertTrue(ranks["0"]["master_port"])
            self.assertEqual(ranks["0"]["master_port"], ranks["1"]["master_port"])
            # torchrun sets OMP_NUM_THREADS=1 for 2 workers; torch's intra-op threads follow it in
            # the fork too (OpenMP read it once, in the template: forking::environment_replaced).
            for seen in ranks.values():
                self.assertEqual(seen["omp_num_threads"], "1", (mode, seen))
                self.assertEqual(seen["torch_threads"], 1, (mode, seen))

    def test_torchrun_too_is_a_fork_of_the_run_not_a_new_interpreter(self):
        # Its Python is the run's, torch imported (harness/cell_in_child.h: torchrun_in_fork).
        for seen in RUNS["fork"]["ranks"].values():
            self.assertEqual(seen["torchruns_by_exec"], 0, seen)
        for seen in RUNS["exec"]["ranks"].values():
            self.assertEqual(seen["torchruns_by_exec"], 1, seen)

    def test_forked_ranks_share_the_hash_secret_ranks_by_exec_do_not(self):
        # What harness/rank_server.h names as the difference: CPython fixes str's hash secret when it
        # starts, so forked ranks iterate a set of strings in one order; `--recipe-processes exec`
        # gives each its own.
        fork, execd = RUNS["fork"]["ranks"], RUNS["exec"]["ranks"]
        self.assertEqual(fork["0"]["hash"], fork["1"]["hash"])
        self.assertNotEqual(execd["0"]["hash"], execd["1"]["hash"])


if __name__ == "__main__":
    BINARY = sys.argv.pop(1)
    unittest.main()
