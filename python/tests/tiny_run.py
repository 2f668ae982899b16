"""A tiny Python recipe for the bridge's tests (python/bridge/tests/bridge_test.cpp).

A linear classifier on a fixed synthetic data set, trained with SGD: small enough to run in
milliseconds, complete enough for every required call of torchconform.Run. `plain_losses` is the
same training written as a bare loop, without the Run class, which the tests compare against.
"""
from typing import List

import torch

import torchconform

FEATURES, CLASSES, SAMPLES, BATCH, LR = 8, 3, 64, 16, 0.1


def make_data(seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(SAMPLES, FEATURES, generator=g)
    y = torch.randint(0, CLASSES, (SAMPLES,), generator=g)
    return x, y


def make_model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Linear(FEATURES, CLASSES)


def plain_losses(seed: int, steps: int) -> List[float]:
    """The training of TinyRun as one bare loop: what train_step must compute, step for step."""
    x, y = make_data(seed)
    model = make_model(seed)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for step in range(steps):
        i = (step * BATCH) % SAMPLES
        loss = torch.nn.functional.cross_entropy(model(x[i:i + BATCH]), y[i:i + BATCH])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


class TinyRun(torchconform.Run):
    """A linear classifier trained with SGD (the bridge's tests)."""

    def setup(self, options: torchconform.RunOptions) -> None:
        self.device = torch.device(options.device)
        self.x, self.y = (t.to(self.device) for t in make_data(options.seed))
        self.model = make_model(options.seed).to(self.device)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=LR)
        self.step = 0

    def train_step(self) -> torchconform.StepRecord:
        self.model.train()
        i = (self.step * BATCH) % SAMPLES
        loss = torch.nn.functional.cross_entropy(self.model(self.x[i:i + BATCH]), self.y[i:i + BATCH])
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        record = torchconform.StepRecord(step=self.step, epoch=self.step // self.steps_per_epoch(),
                                         loss=loss.item(), lr=LR, training_mode=self.model.training)
        self.step += 1
        return record

    def evaluate(self) -> torchconform.EvalResult:
        self.model.eval()
        with torch.no_grad():
            logits = self.model(self.x)
            loss = torch.nn.functional.cross_entropy(logits, self.y).item()
            accuracy = (logits.argmax(1) == self.y).float().mean().item()
        return torchconform.EvalResult(loss=loss, accuracy=accuracy, logits=logits)

    def save_checkpoint(self, path: str) -> None:
        torch.save({"model": self.model.state_dict(), "opt": self.opt.state_dict(), "step": self.step}, path)

    def load_checkpoint(self, path: str) -> None:
        state = torch.load(path, weights_only=True)
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])
        self.step = state["step"]

    def steps_per_epoch(self) -> int:
        return SAMPLES // BATCH

    def parameters(self):
        return dict(self.model.named_parameters())

    def buffers(self):
        return dict(self.model.named_buffers())

    def optimizer_state(self):
        return {}

    def example_input(self, batch: int) -> torch.Tensor:
        return self.x[:batch].clone()


class FailingRun(TinyRun):
    """TinyRun whose train step raises (the bridge's error test)."""

    def train_step(self) -> torchconform.StepRecord:
        return self.helper()

    def helper(self):
        raise ValueError("the step fell over")  # FAILING_LINE: the test finds this line's number


class DeclaredVariant(TinyRun):
    """a variant that declares what must catch it, and breaks nothing (the tests' check cannot catch it)"""

    must_be_caught_by = ("python_smoke",)
    breaks = {"python_smoke": ("trains",)}
