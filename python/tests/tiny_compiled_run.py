"""TinyRun compiled on request (python/bridge/tests/compile_probe_test.cpp): what the bridge's
tc::CompileProbe reads from TorchDynamo. The backend is "eager" (TorchDynamo's graphs run as they
are, no Inductor): the records are TorchDynamo's own, and the test takes milliseconds, not a minute.
Every third batch is half size, so a shape guard fails (dynamic=False); the forward branches on a
tensor's value, a graph break at BRANCH_LINE."""
import torch

import torchconform
from tiny_run import BATCH, TinyRun

BRANCH_LINE = 16  # the `if` below


def forward_with_branch(model, x):
    h = model(x)
    if h.abs().sum() > 1e9:
        h = h * 0.0
    return h


class TinyCompiledRun(TinyRun):
    """TinyRun whose forward is compiled when RunOptions.compile is set."""

    def setup(self, options: torchconform.RunOptions) -> None:
        super().setup(options)
        self.forward = torch.compile(forward_with_branch, backend="eager", dynamic=False) if options.compile \
            else forward_with_branch
        self.compile_asked = options.compile

    def train_step(self) -> torchconform.StepRecord:
        size = BATCH // 2 if self.step % 3 == 2 else BATCH
        x, y = self.x[:size], self.y[:size]
        loss = torch.nn.functional.cross_entropy(self.forward(self.model, x), y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        self.step += 1
        return torchconform.StepRecord(step=self.step - 1, loss=loss.item(), training_mode=True)
