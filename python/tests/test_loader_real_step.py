#!/usr/bin/env python3
"""test_loader_real_step.py: data_saturation's real-step path for a Python recipe (what it runs on
CUDA, torchconform/_loader.py) exercised on the CPU, where the check itself uses a simulated step:
the recipe's loader timed against its own training step, which must train (the parameters move and
the measured steps consume batches). On a machine with CUDA the copy timing runs too. CTest
python.loader_real_step. Exit 0 when so; 1 naming what was not."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, ".."), os.path.join(HERE, "..", "reference")]

import torch  # noqa: E402

import torchconform  # noqa: E402
from torchconform import _loader  # noqa: E402
from reference import PythonReference  # noqa: E402
from regression_run import RegressionRun  # noqa: E402


def check(run_cls, device: str) -> list:
    problems = []
    run = run_cls()
    run.setup(torchconform.RunOptions(device=device, seed=3, quick=True))
    before = {n: p.detach().clone() for n, p in run.parameters().items()}
    stats = _loader.measure_data_wait(run, workers=None, prefetch=None, warmup_steps=1, steps=3, blur_rounds=1,
                                      read_latency_s=0.0, step_s=None)
    moved = any(not torch.equal(before[n], p.detach()) for n, p in run.parameters().items())
    name = f"{run_cls.__name__} on {device}"
    print(f"{name}: {stats}")
    if stats["steps"] != 3 or stats["samples"] <= 0 or stats["wall_s"] <= 0:
        problems.append(f"{name}: measured {stats}")
    if not moved:
        problems.append(f"{name}: the real step did not train (parameters unchanged)")
    if device == "cuda":
        call, total, pinned = _loader.time_copy(run, 1 << 20)
        print(f"{name}: copy call {call:.6f} s, total {total:.6f} s, pinned {pinned}")
        if not (0 < call <= total):
            problems.append(f"{name}: copy timing {call}, {total}")
    return problems


def main() -> int:
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    problems = []
    for device in devices:
        for cls in (PythonReference, RegressionRun):
            problems += check(cls, device)
    for p in problems:
        print("FAIL " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
