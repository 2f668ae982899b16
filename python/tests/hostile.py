"""Hostile recipes: each is TinyRun (a small correct recipe) with one behaviour added that a judge
must survive (issue 45; python/tests/test_hostile.py runs them through `torchconform run`).

None of these is a broken practice the checks should catch: each attacks the verdict itself (ends
the process, hangs, changes the process for later cells, or hands back values no check can judge).
The mechanisms differ from the ones the issue measured where another exists.
"""
import os
import signal
import threading

import torch

import torchconform
from tiny_run import TinyRun


class ExitsZeroMidRun(TinyRun):
    """Ends the process with status 0 on its third train_step (CI would read success)."""
    name = "hostile_exit_zero"

    def train_step(self):
        self._calls = getattr(self, "_calls", 0) + 1
        if self._calls == 3:
            os._exit(0)
        return super().train_step()


class KillsItself(TinyRun):
    """Sends itself SIGKILL in evaluate() (nothing can run after it, not even a handler)."""
    name = "hostile_sigkill"

    def evaluate(self):
        os.kill(os.getpid(), signal.SIGKILL)


class Aborts(TinyRun):
    """abort() in save_checkpoint (SIGABRT, as a failed C assertion in an extension would)."""
    name = "hostile_abort"

    def save_checkpoint(self, path):
        os.abort()


class WaitsForever(TinyRun):
    """Blocks on an event nobody sets, in its second train_step (a lost collective, a dead worker)."""
    name = "hostile_hang"

    def train_step(self):
        self._calls = getattr(self, "_calls", 0) + 1
        if self._calls == 2:
            threading.Event().wait()
        return super().train_step()


class ChangesTheProcess(TinyRun):
    """Leaves the process changed for whatever runs next: float64 default, grad off, 7 threads,
    deterministic algorithms off, another working directory."""
    name = "hostile_world"

    def setup(self, options):
        torch.set_default_dtype(torch.float32)  # its own set-up works; whatever runs after it would not
        super().setup(options)
        torch.set_default_dtype(torch.float64)
        torch.set_num_threads(7)
        torch.use_deterministic_algorithms(False)
        os.chdir("/")

    def train_step(self):
        with torch.enable_grad():  # its own steps work; whatever runs after it would not
            return super().train_step()

    def evaluate(self):
        result = super().evaluate()
        torch.set_grad_enabled(False)
        return result


class NanLoss(TinyRun):
    """Its loss is NaN from the first step (a log of a negative, a 0/0): every step, every run."""
    name = "hostile_nan_loss"

    def setup(self, options):
        super().setup(options)
        with torch.no_grad():
            self.model.weight.fill_(float("nan"))


class BlowsUp(TinyRun):
    """Parameters that grow 1e12-fold a step (an unstable update): infinite by the fourth step, and
    the loss NaN after them."""
    name = "hostile_blow_up"

    def train_step(self):
        record = super().train_step()
        with torch.no_grad():
            for p in self.model.parameters():
                p.mul_(1e12)
        return record


class NoSteps(TinyRun):
    """An epoch of zero steps (a data set smaller than one batch with drop_last)."""
    name = "hostile_no_steps"

    def steps_per_epoch(self):
        return 0


class ConstantLoss(TinyRun):
    """A loss that never moves: the model is frozen (requires_grad off), and the batch is always
    the same one."""
    name = "hostile_constant_loss"

    def setup(self, options):
        super().setup(options)
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.model.bias.requires_grad_(False)

    def train_step(self):
        self.model.train()
        out = self.model(self.x[:16])
        loss = torch.nn.functional.cross_entropy(out, self.y[:16])
        self.step += 1
        return torchconform.StepRecord(step=self.step - 1, epoch=0, loss=loss.item(), lr=0.1,
                                       training_mode=self.model.training)


class WrongTypes(TinyRun):
    """Hands back a loss as text."""
    name = "hostile_wrong_types"

    def train_step(self):
        record = super().train_step()
        record.loss = str(record.loss)
        return record


class PrintsUnicode(TinyRun):
    """Prints and writes non-ASCII text, as any recipe logging a "✓" or a µs does."""
    name = "hostile_unicode"

    def setup(self, options):
        super().setup(options)
        print("set up ✓ (µ-batch 16, λ=0.1)")
