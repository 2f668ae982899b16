"""What the check ``distributed`` asks of a Python recipe's ranks under torchrun
(``tc::DistributedProvider``, harness/contract/distributed_probe.h; the C++ side is
python/bridge/python_run_distributed.cpp). Internal: not the recipe API.

The recipe's DDP training is a :class:`torchconform.Run` set up with ``RunOptions.data_parallel ==
"ddp"`` on every rank, in Python's default process group (made from torchrun's environment by
``torchconform._fsdp.init``). The check's own exchanges between ranks go over a C++ c10d group of
its own beside it (keys of their own in torchrun's store).
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import torch
from torch import nn

from torchconform.run import Run, provides


def distributed_recipe(run: Run) -> Tuple[Optional[Run], str]:
    """(a fresh, not set-up Run that trains the recipe's DDP code, "") or (None, why not).

    The recipe's ``make_distributed()`` when it overrides it; else, when its ``data_parallel_modes``
    has "ddp", a new instance of its own class."""
    if provides(run, "make_distributed"):
        try:
            made = run.make_distributed()
        except NotImplementedError:
            return None, f"{type(run).__name__}.make_distributed() raises NotImplementedError"
        if not isinstance(made, Run):
            raise TypeError(f"{type(run).__name__}.make_distributed() returned {type(made).__name__}, "
                            f"not a torchconform.Run")
    elif "ddp" in tuple(getattr(run, "data_parallel_modes", ())):
        made = type(run)()
    else:
        return None, ("the Python recipe neither declares \"ddp\" in data_parallel_modes nor overrides "
                      "make_distributed() (its setup() would not train with DistributedDataParallel)")
    if "ddp" not in tuple(getattr(made, "data_parallel_modes", ())):
        return None, (f"{type(made).__name__} (the recipe's DDP training) does not declare \"ddp\" in "
                      f"data_parallel_modes")
    return made, ""


def dataset_size(run: Run) -> int:
    """The number of training samples an epoch covers: the recipe's ``dataset_size()``, else the
    length of its ``data_loader()``'s dataset; 0 when neither says."""
    if provides(run, "dataset_size"):
        return int(run.dataset_size())
    if provides(run, "data_loader"):
        try:
            return len(run.data_loader().dataset)
        except (NotImplementedError, AttributeError, TypeError):
            return 0
    return 0


def _couples_samples(model: nn.Module) -> Optional[str]:
    """Why one process on the whole batch cannot compute what the ranks did, or None: dropout draws
    other masks per rank, batch norm (not synchronised) normalises with each rank's own batch."""
    for name, m in model.named_modules():
        if isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0:
            return f"'{name}' is {type(m).__name__}(p={m.p}): each rank draws its own masks"
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and not isinstance(m, nn.SyncBatchNorm) and m.training:
            return (f"'{name}' is {type(m).__name__}: each rank normalises with its own batch's statistics "
                    f"(nn.SyncBatchNorm normalises with the whole batch's)")
    return None


def one_process_gradients(run: Run, parameters: Dict[str, torch.Tensor], x: torch.Tensor,
                          y: torch.Tensor) -> Tuple[Dict[str, torch.Tensor], str]:
    """({name: gradient on the CPU}, "") or ({}, why not comparable): the recipe's bare model loaded
    with ``parameters``, in train mode, on ``x``'s device, its training loss on (x, y) (the whole
    batch of every rank), backpropagated here in one process."""
    try:
        model = run.bare_model()
    except NotImplementedError:
        return {}, "the recipe gives no bare_model()"
    named = dict(model.named_parameters())
    if set(named) != set(parameters):
        missing = sorted(set(parameters) - set(named))
        extra = sorted(set(named) - set(parameters))
        raise RuntimeError(f"the bare model's parameters are not the run's: the run has {missing[:3]} that the "
                           f"bare model lacks, the bare model {extra[:3]} that the run lacks")
    with torch.no_grad():
        for name, value in parameters.items():
            named[name].copy_(value)
    model.to(x.device).train()
    why = _couples_samples(model)
    if why is not None:
        return {}, why
    model.zero_grad(set_to_none=True)
    try:
        loss = run.training_loss(model(x), y)
    except NotImplementedError:
        return {}, "the recipe gives no training_loss()"
    loss.backward()
    out = {}
    for name, p in model.named_parameters():
        if p.grad is None:
            raise RuntimeError(f"the training loss does not depend on '{name}'")
        out[name] = p.grad.detach().to("cpu").clone()
    return out, ""
