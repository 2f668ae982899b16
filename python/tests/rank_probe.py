"""The Python reference, whose distributed cell also writes what each rank saw (test_forked_ranks.py):
its module's import (in which process, with which RANK), torchrun's variables in os.environ, and
torch's intra-op threads. PROBE_DIR names the folder."""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
from reference import PythonReference  # noqa: E402

IMPORTED_IN = os.getpid()
RANK_AT_IMPORT = os.environ.get("RANK")  # as a team's script often reads it: at module level


def torchruns_by_exec():
    """The torchrun processes started by exec for this run (their argv names the script; their
    environment, from the exec, holds this run's PROBE_DIR). A torchrun forked from the run's
    process is none of them: its argv is torchconform's."""
    mine = ("PROBE_DIR=" + os.environ["PROBE_DIR"]).encode()
    found = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if not any(a.endswith(b"/torchrun") for a in argv):
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                found += mine in f.read().split(b"\0")
        except OSError:
            continue
    return found


class RankProbe(PythonReference):
    name = "py_rank_probe"

    def make_distributed(self):
        rank = os.environ.get("RANK", "none")
        seen = {
            "imported_here": IMPORTED_IN == os.getpid(),
            "rank_at_import": RANK_AT_IMPORT,
            "rank": rank,
            "local_rank": os.environ.get("LOCAL_RANK"),
            "master_port": os.environ.get("MASTER_PORT"),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "torch_threads": torch.get_num_threads(),
            "hash": hash("torchconform"),
            "torchruns_by_exec": torchruns_by_exec(),
        }
        with open(os.path.join(os.environ["PROBE_DIR"], f"rank-{rank}.json"), "w", encoding="utf-8") as f:
            json.dump(seen, f)
        return super().make_distributed()
