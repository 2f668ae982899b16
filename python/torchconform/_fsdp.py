"""What the check ``fsdp`` asks of a Python recipe's ranks under torchrun (``tc::DataParallelProbe``,
harness/contract/data_parallel_probe.h; the C++ side is python/bridge/python_run_data_parallel.cpp).
Internal: not the recipe API. Every function here that says "collective" must be called by every
rank, in the same order.

The process group is Python's default one (``torch.distributed``), made here from torchrun's
environment (Gloo on the CPU, NCCL on CUDA) unless the recipe's process already made one; the
check's own exchanges go over it too (:func:`all_gather_text`), so the ranks need no second group.
"""
from __future__ import annotations

import datetime
import os
from typing import Dict, List, Tuple

import torch
import torch.distributed as dist

from torchconform._bridge import the_optimizer
from torchconform.run import Run

try:  # torch >= 2.4 (the pinned 2.15.0 has it)
    from torch.distributed.tensor import DTensor
except ImportError:  # pragma: no cover - an old torch: no parameter is a DTensor
    DTensor = ()  # type: ignore[assignment]


def init(device: str) -> Tuple[int, int]:
    """The default process group (collective): made from torchrun's environment when none exists,
    Gloo for ``device`` "cpu", NCCL for "cuda" (each rank on cuda:LOCAL_RANK). (rank, world size)."""
    if not dist.is_initialized():
        if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
            raise RuntimeError("the fsdp check runs as torchrun's workers (RANK and WORLD_SIZE unset)")
        cuda = device.startswith("cuda")
        if cuda:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend="nccl" if cuda else "gloo", timeout=datetime.timedelta(seconds=120))
        global _made_here
        _made_here = True
    return dist.get_rank(), dist.get_world_size()


_made_here = False  # init() made the default group (leave() destroys only that one)


def leave() -> None:
    """Collective, last: destroys the default group if :func:`init` made it. (A group left to the
    process's exit is torn down by C++ destructors after Python stopped running: a crash at exit.)"""
    global _made_here
    if _made_here and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
    _made_here = False
    # DTensor's sharding-propagation cache is thread-local in C++ and holds Python objects; its
    # destructor runs at exit without the GIL (a Python process empties it in an atexit hook, which
    # an embedded interpreter never runs): "Fatal Python error: PyThreadState_Get" and SIGABRT after
    # the report was written (measured, torch 2.15.0). Emptied here, under the GIL.
    clear = getattr(torch._C, "_clear_DTensor_sharding_propagator_cache", None)
    if clear is not None:
        clear()


def barrier() -> None:
    """Collective."""
    dist.barrier()


def all_gather_text(text: str) -> List[str]:
    """Collective: every rank's ``text``, in rank order."""
    # (Not all_gather_object: it needs NumPy, which a recipe's environment need not have.)
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    data = torch.tensor(list(text.encode("utf-8")), dtype=torch.uint8)
    sizes = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(dist.get_world_size())]
    dist.all_gather(sizes, torch.tensor([data.numel()], dtype=torch.int64, device=device))
    longest = max(int(n.item()) for n in sizes)
    padded = torch.zeros(longest, dtype=torch.uint8)
    padded[:data.numel()] = data
    parts = [torch.zeros(longest, dtype=torch.uint8, device=device) for _ in sizes]
    dist.all_gather(parts, padded.to(device))
    return [bytes(p[:int(n.item())].cpu().tolist()).decode("utf-8") for p, n in zip(parts, sizes)]


def _full(t: torch.Tensor) -> torch.Tensor:
    """The whole tensor (collective for a DTensor: its shards gathered), detached, on the CPU."""
    if isinstance(t, DTensor):
        t = t.full_tensor()
    return t.detach().to("cpu").clone()


def full_parameters(run: Run) -> Dict[str, torch.Tensor]:
    """Collective: every parameter of the recipe whole (sharded ones gathered), by name, on the CPU."""
    return {name: _full(p) for name, p in run.parameters().items()}


def _local_bytes(t: torch.Tensor) -> int:
    local = t.to_local() if isinstance(t, DTensor) else t
    return local.numel() * local.element_size()


def _full_bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()  # a DTensor's numel is the global one


def _row_bytes(t: torch.Tensor) -> int:
    """One dim-0 slice: what sharding a tensor over ranks may add to one rank's 1/N (the padding of
    an uneven split, a tensor with fewer rows than ranks)."""
    if t.dim() == 0 or t.size(0) == 0:
        return _full_bytes(t)
    return _full_bytes(t) // t.size(0)


def _account(tensors) -> List[int]:
    """[bytes this rank holds, bytes the tensors have whole, one dim-0 row per tensor, tensors]."""
    local = full = rows = n = 0
    for t in tensors:
        local += _local_bytes(t)
        full += _full_bytes(t)
        rows += _row_bytes(t)
        n += 1
    return [local, full, rows, n]


def shard_bytes(run: Run) -> Dict[str, object]:
    """What this rank holds of the training state, in bytes, as :func:`_account` counts each part:

    - ``parameters``: the recipe's parameters (``run.parameters()``);
    - ``gradients``: their ``.grad`` where one is set (``None`` ones are not counted: ``counted``
      says how many were);
    - ``optimizer_state``: every tensor in the optimizer's state of more than one element (a 0-dim
      step counter is per parameter, not per element, and is left out: ``scalars`` counts them);
    - ``foreign_parameters``: tensors the optimizer updates that are not the recipe's parameters
      (an optimizer made before the model was sharded keeps the unsharded originals);
    - ``unsharded``: names of the recipe's parameters that are plain tensors (no DTensor) on this rank.
    """
    params = run.parameters()
    grads = [p.grad for p in params.values() if p.grad is not None]
    optimizer = the_optimizer(run)
    state, scalars = [], 0
    for per_param in optimizer.state.values():
        for v in per_param.values():
            if isinstance(v, torch.Tensor):
                if v.numel() > 1 or (isinstance(v, DTensor) and v.dim() > 0):
                    state.append(v)
                else:
                    scalars += 1
    mine = {id(p) for p in params.values()}
    foreign = [p for g in optimizer.param_groups for p in g["params"] if id(p) not in mine]
    return {
        "parameters": _account(params.values()),
        "gradients": _account(grads),
        "optimizer_state": _account(state),
        "foreign_parameters": _account(foreign),
        "scalars": scalars,
        "unsharded": [n for n, p in params.items() if not isinstance(p, DTensor)],
    }
