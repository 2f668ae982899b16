"""The seeds' DDP code as a Python recipe: what the check ``distributed`` holds a Python recipe's
data-parallel training to (py_reference's ``make_distributed()``; the Python twin of
``tc::ref::DistributedReference``, reference/distributed_run.h).

    torchrun --nproc-per-node 2 --no-python torchconform run --check distributed \\
        --python python/reference/reference.py:PythonReference

The seeds' practices (their "Pass:" DDP code, one process per device under torchrun):

- ``DistributedDataParallel(model)``: every rank a replica, gradients averaged in backward;
- ``DistributedSampler(dataset, shuffle=True)`` and ``sampler.set_epoch(epoch)`` every epoch;
- rank 0 alone writes the checkpoint, of ``model.module`` (the unwrapped model), then
  ``dist.barrier()``;
- a checkpoint that resumes mid-epoch: model, optimizer, scheduler, epoch, position, RNG.

The model has no BatchNorm and no Dropout, as the C++ one: batch norm normalises with each rank's own
batch (DDP without SyncBatchNorm) and dropout draws other masks per rank, so neither could equal one
process on the whole batch (the check records its gradient promise as not judged for such a model);
GroupNorm is per sample. The loader has no workers (the seeds' ``num_workers=8`` and pin_memory are
data_saturation's business, judged on py_reference): a torchrun rank starts in seconds.
Each item carries its dataset index, which ``StepRecord.samples`` reports.
"""
from __future__ import annotations

import os
import tempfile
from typing import Dict, Tuple

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset, DistributedSampler

import torchconform

DATASET_SIZE, EVAL_SIZE, BATCH_PER_RANK = 64, 32, 8  # tc::ref::DistributedReference's sizes
CLASSES, IMAGE_SIZE, CHANNELS = 4, 16, 8
DATA_SEED = 4242
LR, MOMENTUM, LR_STEP_SIZE, LR_GAMMA = 0.05, 0.9, 4, 0.5


def synthetic(size: int, seed: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """(N, 3, S, S) images and (N,) labels: a pattern per class plus noise, fixed by ``seed``."""
    g = torch.Generator().manual_seed(seed)
    prototypes = torch.randn(CLASSES, 3, IMAGE_SIZE, IMAGE_SIZE, generator=g)
    labels = torch.arange(size).remainder(CLASSES)
    return prototypes[labels] + 1.5 * torch.randn(size, 3, IMAGE_SIZE, IMAGE_SIZE, generator=g), labels


class IndexedImages(Dataset):
    """(image, label, index): the index is what the step reports as its samples."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        self.images, self.labels = images, labels

    def __len__(self) -> int:
        return self.images.size(0)

    def __getitem__(self, i: int) -> Tuple[torch.Tensor, torch.Tensor, int]:
        return self.images[i], self.labels[i], i


class SmallConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, CHANNELS, 3, padding=1), nn.GroupNorm(2, CHANNELS), nn.ReLU(),
                                      nn.MaxPool2d(4))  # (B, C, S/4, S/4)
        self.head = nn.Linear(CHANNELS * (IMAGE_SIZE // 4) ** 2, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(start_dim=1))  # (B, classes)


class PythonDdpReference(torchconform.Run):
    """the seeds' DDP code: DistributedDataParallel, DistributedSampler.set_epoch, rank-0 writes of the unwrapped model, a barrier"""

    name = "py_ddp_reference"
    data_parallel_modes = ("ddp",)

    # ---- practice slots (the variants in variants.py replace one each) ----
    def wrap(self, model: nn.Module) -> nn.Module:
        """What the step's forward runs: the model in DistributedDataParallel under torchrun."""
        if not self.parallel:
            return model
        return DistributedDataParallel(model, device_ids=[self.device.index] if self.device.type == "cuda" else None)

    def average_gradients(self) -> None:
        """DDP averaged the gradients over the ranks during backward: nothing left to do."""

    def begin_epoch(self) -> None:
        self.sampler.set_epoch(self.epoch)  # a new order every epoch, the same on every rank

    def model_state(self) -> Dict[str, torch.Tensor]:
        return self.model.state_dict()  # the unwrapped model (model.module under DDP)

    def writes_files(self) -> bool:
        return not self.parallel or dist.get_rank() == 0

    def after_write(self) -> None:
        if self.parallel:
            dist.barrier()  # no rank reads the checkpoint before rank 0 has put it in place

    # ---- torchconform.Run ----
    def setup(self, options: torchconform.RunOptions) -> None:
        self.options = options
        self.device = torch.device(options.device)
        self.parallel = options.data_parallel == "ddp"
        if self.parallel and self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.manual_seed(options.seed)  # the same initial weights on every rank
        torch.use_deterministic_algorithms(options.deterministic)
        rank, world = (dist.get_rank(), dist.get_world_size()) if self.parallel else (0, 1)
        self.dataset = IndexedImages(*synthetic(DATASET_SIZE, DATA_SEED))
        self.eval_images, self.eval_labels = synthetic(EVAL_SIZE, DATA_SEED + 1)
        self.sampler = DistributedSampler(self.dataset, num_replicas=world, rank=rank, shuffle=True,
                                          seed=options.seed, drop_last=True)
        self.loader = DataLoader(self.dataset, batch_size=BATCH_PER_RANK, sampler=self.sampler, drop_last=True,
                                 pin_memory=self.device.type == "cuda")
        self.model = SmallConvNet().to(self.device)
        self.train_model = self.wrap(self.model)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=LR, momentum=MOMENTUM)
        self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=LR_STEP_SIZE, gamma=LR_GAMMA)
        self.epoch, self.position, self.step = 0, 0, 0
        self.batches = None
        self._last_batch = None

    def train_step(self) -> torchconform.StepRecord:
        if self.batches is None:
            self.begin_epoch()
            self.batches = iter(self.loader)
            for _ in range(self.position):  # resumed mid-epoch: the batches already trained on
                next(self.batches)
        x, y, index = next(self.batches)
        x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
        self._last_batch = (x.clone(), y.clone())
        self.model.train()
        lr = self.optimizer.param_groups[0]["lr"]
        loss = self.training_loss(self.train_model(x), y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.average_gradients()
        self.after_backward()  # the check reads the gradients the update uses here
        self.optimizer.step()
        self.scheduler.step()
        record = torchconform.StepRecord(step=self.step, epoch=self.epoch, loss=loss.item(), lr=lr, training_mode=True,
                                         samples=index.tolist())
        self.step += 1
        self.position += 1
        if self.position == self.steps_per_epoch():
            self.epoch, self.position, self.batches = self.epoch + 1, 0, None
        return record

    def steps_per_epoch(self) -> int:
        return len(self.loader)

    def dataset_size(self) -> int:
        return len(self.dataset)

    @torch.no_grad()
    def evaluate(self) -> torchconform.EvalResult:
        was_training = self.model.training
        self.model.eval()
        logits = self.model(self.eval_images.to(self.device))
        loss = F.cross_entropy(logits, self.eval_labels.to(self.device)).item()
        accuracy = (logits.argmax(1).cpu() == self.eval_labels).float().mean().item()
        self.model.train(was_training)
        return torchconform.EvalResult(loss=loss, accuracy=accuracy, logits=logits.cpu())

    def save_checkpoint(self, path: str) -> None:
        if self.writes_files():
            state = {"model_state_dict": self.model_state(), "optimizer_state_dict": self.optimizer.state_dict(),
                     "scheduler_state_dict": self.scheduler.state_dict(), "epoch": self.epoch,
                     "position": self.position, "step": self.step, "rng": torch.get_rng_state()}
            fd, tmp = tempfile.mkstemp(prefix=".ckpt-", dir=os.path.dirname(os.path.abspath(path)))
            try:
                with os.fdopen(fd, "wb") as f:
                    torch.save(state, f)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)  # a reader sees the old file or the new one, never half of one
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
        self.after_write()

    def load_checkpoint(self, path: str) -> None:
        state = torch.load(path, map_location="cpu", weights_only=True)
        self.model.load_state_dict(state["model_state_dict"])
        self.optimizer.load_state_dict(state["optimizer_state_dict"])
        self.scheduler.load_state_dict(state["scheduler_state_dict"])
        self.epoch, self.position, self.step = int(state["epoch"]), int(state["position"]), int(state["step"])
        torch.set_rng_state(state["rng"])
        self.batches = None

    def parameters(self) -> torchconform.NamedTensors:
        return dict(self.model.named_parameters())

    def buffers(self) -> torchconform.NamedTensors:
        return dict(self.model.named_buffers())

    def optimizer_state(self) -> torchconform.NamedTensors:
        names = {id(p): n for n, p in self.model.named_parameters()}
        return {f"{names[id(p)]}.momentum_buffer": s["momentum_buffer"]
                for p, s in self.optimizer.state.items() if "momentum_buffer" in s}

    def last_batch(self) -> Tuple[torch.Tensor, torch.Tensor]:
        return self._last_batch

    def training_loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(output, target)

    def bare_model(self) -> nn.Module:
        return SmallConvNet()
