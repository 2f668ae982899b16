"""The data_saturation check's probe of a Python recipe (``tc::LoaderProbe``), made from the recipe's
:meth:`torchconform.Run.data_loader`: the step loop's wait for data timed here, in the process that
trains, while the recipe's DataLoader workers make the batches. Internal: called by the C++ bridge.
"""
from __future__ import annotations

import itertools
import time
from typing import Callable, Dict, List, Optional, Tuple

import torch


def _map_tensors(batch, f):
    """``f`` applied to every tensor of ``batch`` (a tensor, or a dict, list or tuple of them, nested)."""
    if isinstance(batch, torch.Tensor):
        return f(batch)
    if isinstance(batch, dict):
        return type(batch)((k, _map_tensors(v, f)) for k, v in batch.items())
    if isinstance(batch, (list, tuple)):
        return type(batch)(_map_tensors(v, f) for v in batch)
    return batch


def _tensors(batch) -> List[torch.Tensor]:
    out: List[torch.Tensor] = []
    _map_tensors(batch, lambda t: out.append(t) or t)
    return out


def _blur_cost(x: torch.Tensor, rounds: int) -> None:
    """``rounds`` passes of a blur over every dimension but the batch's (images: the 5-point blur of
    C++'s ``tc::CostlyAugment``), on a float copy: CPU work in proportion to the tensor's size,
    whatever its layout (rows of features, token ids, images of any channel count)."""
    work = x.detach().to(torch.float32)
    dims = list(range(1, work.dim())) or [0]
    for _ in range(rounds):
        acc = work.clone()
        for d in dims:
            acc += work.roll(1, d) + work.roll(-1, d)
        work = acc * (1.0 / (1 + 2 * len(dims)))


class CostlyAugment:
    """The check's extra work on each batch's inputs, where the batch is made (C++'s
    ``tc::CostlyAugment``: a read latency, then ``rounds`` passes of a blur). It costs CPU time and
    leaves the inputs as they are (a tensor or a dict, list or tuple of tensors, of any layout and
    dtype): the recipe's own code goes on with its own batch. Picklable, so that it reaches the
    workers of any start method."""

    def __init__(self, rounds: int, latency_s: float) -> None:
        self.rounds, self.latency_s = int(rounds), float(latency_s)

    def __call__(self, x):
        if self.latency_s > 0:
            time.sleep(self.latency_s)  # the read
        for t in _tensors(x):
            _blur_cost(t, self.rounds)
        return x


def _fixed_like(x: torch.Tensor) -> torch.Tensor:
    if x.is_floating_point() or x.is_complex():
        return torch.linspace(0.0, 1.0, x.numel(), dtype=x.dtype).reshape(x.shape)
    if x.dtype == torch.bool:
        return (torch.arange(x.numel()) % 2 == 0).reshape(x.shape)
    top = int(x.max()) + 1 if x.numel() else 1  # integer ids: stay within the values seen (a vocabulary)
    return (torch.arange(x.numel()) % max(top, 1)).to(x.dtype).reshape(x.shape)


class FixedInputs:
    """Replaces a batch's inputs with fixed tensors of their shapes and dtypes (every tensor of a dict,
    list or tuple): what the recipe's augmentation then makes of them shows its randomness alone."""

    def __call__(self, x):
        return _map_tensors(x, _fixed_like)


def _inputs(batch):
    return batch[0] if isinstance(batch, (tuple, list)) else batch


def _samples(batch) -> int:
    tensors = _tensors(_inputs(batch))
    return int(tensors[0].size(0)) if tensors and tensors[0].dim() > 0 else 1


def _flat(inputs) -> torch.Tensor:
    """Every tensor of a batch's inputs as one float64 vector, in order (for bitwise comparison)."""
    parts = [t.detach().cpu().to(torch.float64).flatten() for t in _tensors(inputs)]
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)


def _shut_down(iterator) -> None:
    shutdown = getattr(iterator, "_shutdown_workers", None)
    if shutdown is not None:
        shutdown()  # persistent workers too: this loader is the probe's own


def run_device(run) -> torch.device:
    """The device the recipe trains on: its first parameter's."""
    for p in run.parameters().values():
        return p.device
    return torch.device("cpu")


def real_step(run) -> Callable[[object], None]:
    """The recipe's training step on one batch of its loader, on its device: the batch's tensors
    moved there (``non_blocking``: the copy overlaps where the loader pinned them), the recipe's
    :meth:`forward_train` and :meth:`training_loss`, backward and its optimizer's step; over when the
    device is (the loss read back). What data_saturation times against the wait on CUDA."""
    from torchconform._bridge import the_optimizer

    device = run_device(run)
    optimizer = the_optimizer(run)

    def step(batch) -> None:
        x = _map_tensors(batch[0], lambda t: t.to(device, non_blocking=True))
        y = _map_tensors(batch[1], lambda t: t.to(device, non_blocking=True))
        loss = run.training_loss(run.forward_train(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        loss.item()

    return step


def time_copy(run, nbytes: int) -> Tuple[float, float, bool]:
    """(seconds in the copy call, seconds until the copy is on the device, pinned): a host tensor of
    about ``nbytes`` in memory as the recipe's loader leaves its batches (pinned when its DataLoader
    has ``pin_memory``), moved to the recipe's device with ``non_blocking=True``. (How the recipe's
    own step moves a batch is its code, which is not seen here: its loader's pinning is.)"""
    device = run_device(run)
    loader = run.data_loader(epoch=0, batches=1, workers=0)
    host = torch.rand(max(1, nbytes // 4))
    if getattr(loader, "pin_memory", False):
        host = host.pin_memory()
    host.to(device, non_blocking=True)  # warm-up: allocator, context
    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    on_device = host.to(device, non_blocking=True)
    call = time.perf_counter() - t0
    torch.cuda.synchronize(device)
    total = time.perf_counter() - t0
    del on_device
    return call, total, bool(host.is_pinned())


def measure_data_wait(run, workers: Optional[int], prefetch: Optional[int], warmup_steps: int, steps: int,
                      blur_rounds: int, read_latency_s: float, step_s: Optional[float]) -> Dict[str, float]:
    """``tc::ref::time_data_wait`` over the recipe's loader: warm-up steps not counted, then the time
    blocked in ``next()`` against a device step of ``step_s`` (a sleep: the host is free, as while a
    GPU runs the step), or, ``step_s`` None, the recipe's real step on its device (:func:`real_step`)."""
    transform = CostlyAugment(blur_rounds, read_latency_s) if blur_rounds > 0 or read_latency_s > 0 else None
    loader = run.data_loader(epoch=0, batches=warmup_steps + steps, workers=workers, prefetch=prefetch,
                             transform=transform)
    device_step = real_step(run) if step_s is None else None
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
            device_step(batch) if device_step else time.sleep(step_s)
        start = time.perf_counter()
        for _ in range(steps):
            t0 = time.perf_counter()
            batch = next(it, None)
            out["wait_s"] += time.perf_counter() - t0
            if batch is None:
                break
            device_step(batch) if device_step else time.sleep(step_s)
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
        return [_flat(_inputs(b)) for b in itertools.islice(it, batches)]
    finally:
        _shut_down(it)
