"""A user's own small Python recipe, written apart from the reference: an MLP regression on tabular
rows (8 features -> 1 target), Adam, a cosine schedule, a checkpoint dict, a DataLoader with two
workers and no augmentation, mixed precision with autocast and a GradScaler. Its evaluation has no
accuracy: ``EvalResult(loss=mse, outputs=predictions)``. Every check that applies must pass it
(python/tests/test_written_apart.py)::

    torchconform run --device cpu --python python/tests/regression_run.py:RegressionRun
"""
from __future__ import annotations

import copy
import hashlib
import io
import os
import random
import tempfile
from typing import Dict, List, Optional

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, default_collate

import torchconform

FEATURES, HIDDEN, ROWS, EVAL_ROWS, BATCH = 8, 32, 128, 64, 16
LR, CLIP = 3e-3, 1.0


def digest(state: Dict[str, object]) -> str:
    """sha256 of the state's serialisation (torch.save checks no bytes of the tensors)."""
    buf = io.BytesIO()
    torch.save(state, buf)
    return hashlib.sha256(buf.getvalue()).hexdigest()


def rows(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, FEATURES, generator=g)
    w = torch.linspace(-1.0, 1.0, FEATURES)
    y = (x @ w).sin().unsqueeze(1) + 0.05 * torch.randn(n, 1, generator=g)
    return x, y


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.GELU(), nn.Dropout(0.1), nn.Linear(HIDDEN, 1))
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class Collate:
    """The batch of rows, with ``transform`` (a probe's) applied to its inputs where it is made."""

    def __init__(self, transform=None) -> None:
        self.transform = transform

    def __call__(self, samples):
        x, y = default_collate(samples)
        return (self.transform(x) if self.transform is not None else x), y


def seed_worker(worker_id: int) -> None:
    s = torch.initial_seed() % 2**32
    random.seed(s)


class RegressionRun(torchconform.Run):
    """an MLP regression on tabular rows, Adam with a cosine schedule (written apart from the reference)"""

    name = "regression_run"
    amp_dtypes = ("bf16", "fp16")

    def setup(self, options: torchconform.RunOptions) -> None:
        self.options, self.amp = options, options.amp
        self.device = torch.device(options.device)
        torch.manual_seed(options.seed)
        random.seed(options.seed)
        torch.use_deterministic_algorithms(options.deterministic)
        self.train_rows = TensorDataset(*rows(ROWS, 11))
        self.eval_x, self.eval_y = rows(EVAL_ROWS, 12)
        self.model = Mlp().to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=LR)
        self.schedule = torch.optim.lr_scheduler.CosineAnnealingLR(self.optimizer, T_max=4 * self.steps_per_epoch())
        self.scaler = self.amp.grad_scaler(self.device.type)
        self.generator = torch.Generator().manual_seed(options.seed)
        self.epoch, self.position, self.global_step = 0, 0, 0
        self.batches: Optional[List] = None
        self._last = None

    def _loader(self, epoch: int, workers: int = 2, transform=None) -> DataLoader:
        g = torch.Generator().manual_seed(self.options.seed * 1000 + epoch)  # the epoch's shuffle
        return DataLoader(self.train_rows, batch_size=BATCH, shuffle=True, generator=g, num_workers=workers,
                          worker_init_fn=seed_worker, drop_last=True, collate_fn=Collate(transform))

    def next_batch(self):
        """The step's batch on the device (a new epoch when the last one is used up), kept for
        ``last_batch``; the model put in training mode."""
        if self.batches is None:
            self.batches = list(self._loader(self.epoch, workers=0))
        if self.position >= len(self.batches):
            self.epoch, self.position = self.epoch + 1, 0
            self.batches = list(self._loader(self.epoch, workers=0))
        x, y = (t.to(self.device) for t in self.batches[self.position])
        self.model.train()
        self._last = (x.clone(), y)
        return x, y

    def train_step(self) -> torchconform.StepRecord:
        lr = self.optimizer.param_groups[0]["lr"]
        x, y = self.next_batch()
        with torch.autocast(self.device.type, dtype=self.amp.torch_dtype, enabled=self.amp.enabled):
            loss = nn.functional.mse_loss(self.model(x).float(), y) * self.amp.loss_weight
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.after_backward()
        self.scaler.unscale_(self.optimizer)
        nn.utils.clip_grad_norm_(self.model.parameters(), CLIP)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.schedule.step()
        record = torchconform.StepRecord(step=self.global_step, epoch=self.epoch, loss=loss.item(), lr=lr,
                                         training_mode=self.model.training)
        self.position += 1
        self.global_step += 1
        return record

    @torch.no_grad()
    def evaluate(self) -> torchconform.EvalResult:
        self.model.eval()
        out = self.model(self.eval_x.to(self.device))
        loss = nn.functional.mse_loss(out, self.eval_y.to(self.device)).item()
        return torchconform.EvalResult(loss=loss, outputs=out)

    def state(self) -> Dict[str, object]:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "schedule": self.schedule.state_dict(), "scaler": self.scaler.state_dict(),
                "epoch": self.epoch, "position": self.position, "step": self.global_step,
                "torch_rng": torch.get_rng_state()}

    def save_checkpoint(self, path: str) -> None:
        state = self.state()
        state["sha256"] = digest(state)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)))
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def load_checkpoint(self, path: str) -> None:
        s = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(s, dict) or s.pop("sha256", None) != digest(s):
            raise ValueError(f"{path}: the checkpoint does not match its digest")
        missing = {"model", "optimizer", "schedule", "scaler", "epoch", "position", "step", "torch_rng"} - set(s)
        if missing:
            raise KeyError(f"{path}: no {', '.join(sorted(missing))}")
        before = copy.deepcopy(self.state())
        try:
            self.apply(s)
        except BaseException:
            self.apply(before)  # whole or not at all
            raise

    def apply(self, s: Dict[str, object]) -> None:
        self.model.load_state_dict(s["model"])
        self.optimizer.load_state_dict(s["optimizer"])
        self.schedule.load_state_dict(s["schedule"])
        self.scaler.load_state_dict(s["scaler"])
        self.epoch, self.position, self.global_step = int(s["epoch"]), int(s["position"]), int(s["step"])
        torch.set_rng_state(s["torch_rng"])
        self.batches = None

    def steps_per_epoch(self) -> int:
        return ROWS // BATCH

    def parameters(self):
        return dict(self.model.named_parameters())

    def buffers(self):
        return dict(self.model.named_buffers())

    def optimizer_state(self):
        names = {id(p): n for n, p in self.model.named_parameters()}
        return {f"{names[id(p)]}.{k}": v for p, st in self.optimizer.state.items() for k, v in st.items()
                if isinstance(v, torch.Tensor) and v.dim() > 0}

    # optional probes
    def example_input(self, batch: int) -> torch.Tensor:
        return self.eval_x[:batch].to(self.device)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        was = self.model.training
        self.model.eval()
        with torch.no_grad():
            out = self.model(x)
        self.model.train(was)
        return out

    def forward_train(self, x: torch.Tensor) -> torch.Tensor:
        self.model.train()
        return self.model(x)

    def last_batch(self):
        return self._last

    def training_loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return nn.functional.mse_loss(output, target)

    def clip_norm(self) -> float:
        return CLIP

    def declared_init(self) -> List[torchconform.InitSpec]:
        return [torchconform.InitSpec(n, "normal", 0.0, 0.02) if n.endswith("weight") else torchconform.InitSpec(n, "constant")
                for n, _ in self.model.named_parameters()]

    def bare_model(self) -> nn.Module:
        with torch.random.fork_rng(devices=[]):
            return Mlp()

    def data_loader(self, epoch=0, batches=None, workers=None, prefetch=None, transform=None):
        loader = self._loader(epoch, workers=2 if workers is None else workers, transform=transform)
        if batches is None:
            return loader
        return DataLoader(loader.dataset, batch_sampler=torchconform.RepeatedBatches(loader.batch_sampler, batches),
                          num_workers=loader.num_workers, worker_init_fn=seed_worker, collate_fn=loader.collate_fn,
                          prefetch_factor=prefetch if (prefetch and loader.num_workers) else None)
