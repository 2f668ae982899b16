"""The data_saturation check's probe of a Python recipe (``tc::LoaderProbe``), made from the recipe's
:meth:`torchconform.Run.data_loader`: the step loop's wait for data timed here, in the process that
trains, while the recipe's DataLoader workers make the batches. Internal: called by the C++ bridge.
"""
from __future__ import annotations

import itertools
import time
from typing import Dict, List, Optional

import torch


class CostlyAugment:
    """The check's extra work on each batch's inputs, where the batch is made (C++'s
    ``tc::CostlyAugment``: a read latency, then ``rounds`` passes of a 5-point blur). Picklable, so
    that it reaches the workers of any start method."""

    def __init__(self, rounds: int, latency_s: float) -> None:
        self.rounds, self.latency_s = int(rounds), float(latency_s)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.latency_s > 0:
            time.sleep(self.latency_s)  # the read
        for _ in range(self.rounds):  # (B, C, H, W)
            x = (x + x.roll(1, 2) + x.roll(-1, 2) + x.roll(1, 3) + x.roll(-1, 3)) * 0.2
        return x


class FixedInputs:
    """Replaces a batch's inputs with one fixed tensor of their shape: what the recipe's augmentation
    then makes of it shows its randomness alone."""

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return torch.linspace(0.0, 1.0, x.numel(), dtype=x.dtype).reshape(x.shape)


def _inputs(batch) -> torch.Tensor:
    return batch[0] if isinstance(batch, (tuple, list)) else batch


def _samples(batch) -> int:
    return int(_inputs(batch).size(0))


def _shut_down(iterator) -> None:
    shutdown = getattr(iterator, "_shutdown_workers", None)
    if shutdown is not None:
        shutdown()  # persistent workers too: this loader is the probe's own


def measure_data_wait(run, workers: Optional[int], prefetch: Optional[int], warmup_steps: int, steps: int,
                      blur_rounds: int, read_latency_s: float, step_s: float) -> Dict[str, float]:
    """``tc::ref::time_data_wait`` over the recipe's loader: warm-up steps not counted, then the time
    blocked in ``next()`` against a device step of ``step_s`` (a sleep: the host is free, as while a
    GPU runs the step)."""
    transform = CostlyAugment(blur_rounds, read_latency_s) if blur_rounds > 0 or read_latency_s > 0 else None
    loader = run.data_loader(epoch=0, batches=warmup_steps + steps, workers=workers, prefetch=prefetch,
                             transform=transform)
    it = iter(loader)
    out = {"steps": 0, "warmup_steps": warmup_steps, "wall_s": 0.0, "wait_s": 0.0, "warmup_wait_s": 0.0,
           "samples": 0}
    try:
        for _ in range(warmup_steps):
            t0 = time.perf_counter()
            batch = next(it, None)
            out["warmup_wait_s"] += time.perf_counter() - t0
            if batch is None:
                raise RuntimeError("data_loader() ended during the warm-up: it must give `batches` batches")
            time.sleep(step_s)
        start = time.perf_counter()
        for _ in range(steps):
            t0 = time.perf_counter()
            batch = next(it, None)
            out["wait_s"] += time.perf_counter() - t0
            if batch is None:
                break
            time.sleep(step_s)
            out["samples"] += _samples(batch)
            out["steps"] += 1
        out["wall_s"] = time.perf_counter() - start
    finally:
        _shut_down(it)
    return out


def worker_augmentations(run, epoch: int, batches: int) -> List[torch.Tensor]:
    """The recipe's augmentation of one fixed input for batches 0..batches-1 of ``epoch`` (at most
    one epoch's), each made where its loader makes that batch, with that batch's randomness."""
    batches = min(batches, int(run.steps_per_epoch()))
    it = iter(run.data_loader(epoch=epoch, batches=batches, transform=FixedInputs()))
    try:
        return [_inputs(b).detach().cpu().clone() for b in itertools.islice(it, batches)]
    finally:
        _shut_down(it)
