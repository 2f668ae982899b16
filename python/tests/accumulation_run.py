"""Gradient accumulation in a user's own Python loop (issue 40), on regression_run.py's recipe: each
batch of 16 rows is cut by ``split(6)`` into micro-batches of 6, 6 and 4, each backpropagated on
its own before the next is built, the step after the last. The MLP keeps PyTorch's default
initialisation, declared with ``torchconform.default_init``.

- ``AccumulationRun``: each micro-batch's mean loss weighed by its share of the batch (6/16, 6/16,
  4/16), so the step's gradient is the batch's: every check that applies passes it.
- ``UndividedAccumulationRun``: the micro-batches' mean losses backpropagated undivided, the step's
  gradient 3x the batch's: step_hygiene's ``batch_gradient`` must catch it.

    torchconform run --device cpu --check step_hygiene --python python/tests/accumulation_run.py
"""
from __future__ import annotations

from typing import List

import torch
from torch import nn

import torchconform
from regression_run import CLIP, FEATURES, HIDDEN, RegressionRun

MICRO = 6  # rows per micro-batch (the last one smaller)


class DefaultMlp(nn.Module):
    """regression_run's MLP with PyTorch's default initialisation."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.GELU(), nn.Dropout(0.1), nn.Linear(HIDDEN, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class AccumulationRun(RegressionRun):
    """regression rows in micro-batches of 6, 6 and 4, each loss weighed by its share (written apart)"""

    name = "accumulation_run"
    amp_dtypes = ()
    weighed = True

    def setup(self, options: torchconform.RunOptions) -> None:
        super().setup(options)
        torch.manual_seed(options.seed)
        self.model = DefaultMlp().to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=3e-3)
        self.schedule = torch.optim.lr_scheduler.CosineAnnealingLR(self.optimizer, T_max=4 * self.steps_per_epoch())

    def train_step(self) -> torchconform.StepRecord:
        lr = self.optimizer.param_groups[0]["lr"]
        x, y = self.next_batch()
        self.optimizer.zero_grad(set_to_none=True)
        reported = 0.0
        for xs, ys in zip(x.split(MICRO), y.split(MICRO)):
            loss = nn.functional.mse_loss(self.model(xs), ys)
            if self.weighed:
                loss = loss * (xs.shape[0] / x.shape[0])
            loss.backward()
            reported += loss.item() if self.weighed else loss.item() * xs.shape[0] / x.shape[0]
        self.after_backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), CLIP)
        self.optimizer.step()
        self.schedule.step()
        record = torchconform.StepRecord(step=self.global_step, epoch=self.epoch, loss=reported, lr=lr,
                                         training_mode=self.model.training)
        self.position += 1
        self.global_step += 1
        return record

    def declared_init(self) -> List[torchconform.InitSpec]:
        return torchconform.default_init(self.model)

    def bare_model(self) -> nn.Module:
        with torch.random.fork_rng(devices=[]):
            return DefaultMlp()


class UndividedAccumulationRun(AccumulationRun):
    """the same, the micro-batches' mean losses backpropagated undivided (3x the batch's gradient)"""

    name = "undivided_accumulation_run"
    weighed = False
