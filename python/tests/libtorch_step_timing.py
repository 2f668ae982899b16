"""py_reference with LibTorch's StepLR timing, for the bitwise comparison with the C++ reference
(python/bridge/tests/reference_parity_test.cpp).

The two StepLRs multiply the rate by gamma one step apart: Python's ``StepLR`` after step_size
scheduler steps (the rate of step 3 is decayed for step_size 3), LibTorch's
``torch::optim::StepLR`` one call later (step 4; docs/python.md). Everything else is the same
computation, so with LibTorch's timing the losses must agree bit for bit.
"""
from __future__ import annotations

import torch

from reference import LR_GAMMA, LR_STEP_SIZE, PythonReference


class LibTorchStepLR(torch.optim.lr_scheduler.LRScheduler):
    """``torch::optim::StepLR``: at its k-th step() call (k from 0) it multiplies the rate by gamma
    when k > 0 and k % step_size == 0 (after which the count moves on)."""

    def __init__(self, optimizer, step_size: int, gamma: float) -> None:
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer)

    def get_lr(self):
        k = self.last_epoch - 1  # calls made before this one (the constructor's own step is call -1)
        if k <= 0 or k % self.step_size != 0:
            return [group["lr"] for group in self.optimizer.param_groups]
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]


class LibTorchTimedReference(PythonReference):
    """py_reference with LibTorch's StepLR timing (the bitwise comparison with the C++ reference)"""

    name = "py_reference_libtorch_timing"
    control = False

    def setup(self, options) -> None:
        super().setup(options)
        self.scheduler = LibTorchStepLR(self.optimizer, LR_STEP_SIZE, LR_GAMMA)
