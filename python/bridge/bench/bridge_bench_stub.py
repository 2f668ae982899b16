"""The Python half of the bridge's benchmarks (python/bridge/bench/bench_bridge.cpp; docs/python.md,
"Speed"): a recipe whose calls do no work, so that a call to it through the bridge measures the
bridge, and ``ns_per_call``, which times the very same calls made from Python.
"""
from __future__ import annotations

import time

import torchconform


class BridgeBenchStub(torchconform.Run):
    """does no work: what one call through the bridge costs by itself (python/bridge/bench)"""

    name = "bridge_bench_stub"

    def __init__(self) -> None:
        # One record, made once: train_step() returns what a real step returns, at no cost.
        self.record = torchconform.StepRecord(step=0, epoch=0, loss=1.0, lr=0.05, training_mode=True)

    def setup(self, options: torchconform.RunOptions) -> None:
        self.options = options

    def train_step(self) -> torchconform.StepRecord:
        return self.record

    def evaluate(self) -> torchconform.EvalResult:
        return torchconform.EvalResult()

    def save_checkpoint(self, path: str) -> None:
        pass

    def load_checkpoint(self, path: str) -> None:
        pass

    def steps_per_epoch(self) -> int:
        return 6

    def parameters(self) -> torchconform.NamedTensors:
        return {}

    def buffers(self) -> torchconform.NamedTensors:
        return {}

    def optimizer_state(self) -> torchconform.NamedTensors:
        return {}


def ns_per_call(obj: object, method: str, calls: int) -> float:
    """Nanoseconds per ``obj.method()`` called from a Python loop (the attribute looked up each
    time, as a loop written in Python does), the empty loop's own cost taken out."""
    if not method.isidentifier():
        raise ValueError(f"not a method name: {method!r}")
    scope: dict = {}
    exec(f"def loop(obj, r):\n    for _ in r:\n        obj.{method}()\n", scope)
    loop, r, clock = scope["loop"], range(max(1, int(calls))), time.perf_counter_ns

    def empty(obj, r):
        for _ in r:
            pass

    t0 = clock()
    loop(obj, r)
    t1 = clock()
    empty(obj, r)
    t2 = clock()
    return max(0, (t1 - t0) - (t2 - t1)) / len(r)
