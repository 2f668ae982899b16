"""The seeds' "Pass:" code assembled into one Python recipe: the Python twin of the C++ reference.

``torchconform run --python python/reference/reference.py:PythonReference`` (recipe ``py_reference``).

It mirrors ``tc::ref::ReferenceRun`` (reference/reference_run.cpp, data.cpp, model.cpp) part for part:

- data: the same synthetic images (96 train, 64 held out, 4 classes, 3x16x16, data seeds 20240601
  and 777, drawn with the same torch generator calls), batch 16 with drop_last (6 steps an epoch),
  held-out batches of 32;
- the loader: a ``torch.utils.data.DataLoader`` over the training set with workers (the count from
  the machine, as ``default_workers``: one per core minus the training thread's, 1..8),
  ``worker_init_fn``, a seeded ``generator``, ``persistent_workers``, ``prefetch_factor=4``,
  ``pin_memory`` + ``non_blocking`` on CUDA. Its sampler is the C++ ``SeededSampler``: it shuffles
  with the loader's own seeded generator at the top of each epoch (``set_epoch``), draws the epoch's
  augmentation seed from it, and keeps its position so that a checkpoint resumes mid-epoch exactly.
  Each batch is augmented on a worker from a seed of its own (``batch_seed``: splitmix64 of the
  epoch's seed and the batch's position), so a batch is the same on any worker and after a resume;
  the flips and shifts draw from ``MT19937_64`` below, an exact port of libstdc++'s
  ``std::mt19937_64`` with its ``bernoulli_distribution`` and ``uniform_int_distribution``, the gain
  and the noise from a torch generator seeded as the C++ one is;
- the model: the seeds' ``ImageClassifier`` (Conv-BN-ReLU-MaxPool, Dropout-Linear, 16 channels),
  built in ``__init__``, initialised explicitly with ``model.apply`` (conv kaiming-normal fan_out
  relu, BN 1/0, linear N(0, 0.01)/0), ``flatten(start_dim=1)``; activation checkpointing of the
  features with ``use_reentrant=False`` when asked;
- the step: ``zero_grad(set_to_none=True)``, backward, ``clip_grad_norm_(max_norm=1.0)``, SGD
  (lr 0.05, momentum 0.9, weight decay 5e-4), ``StepLR(step_size=3, gamma=0.8)`` after every step;
- evaluation: ``model.eval()`` under ``@torch.no_grad()``; ``model.train()`` at the top of each
  training epoch;
- the checkpoint: a dict of state_dicts (model, optimizer, scheduler), progress, every RNG state
  (torch CPU and CUDA, Python's ``random``, the loader's generators) and the sampler's epoch order
  and position, written with ``torch.save`` to a temporary file, fsynced, renamed over the target;
  read with ``torch.load(weights_only=True)``, nothing applied unless all of it applies.

Compared with the C++ reference (measured on the CPU, seed 1234 as `torchconform run` uses, torch
2.15.0; the C++ losses from a report's reproducibility and resume_equality cells of recipe
``reference``, metrics.fingerprint.loss_hex, 14 steps): the data, the model's initial parameters,
the batches (the augmentation included) and the losses of steps 0 to 3 are bitwise equal:

    step  lr (py)  loss (py)        loss (C++)
    0     0.05     0x1.7d3e94p+0    0x1.7d3e94p+0
    1     0.05     0x1.ba3d5cp+0    0x1.ba3d5cp+0
    2     0.05     0x1.9a75b6p+0    0x1.9a75b6p+0
    3     0.04     0x1.8281eep+0    0x1.8281eep+0   (the loss before step 3's update)
    4     0.04     0x1.71e818p+0    0x1.73f894p+0   first difference (-0.0081)

The first difference is the learning rate step 3 updates with, so every loss from step 4 on:
``torch.optim.lr_scheduler.StepLR`` first decays at step 3 (its constructor takes an initial step:
0.05 for steps 0-2, 0.04 from step 3), LibTorch's ``torch::optim::StepLR`` one step later (0.05 for
steps 0-3, 0.04 from step 4; docs/python.md records it). This recipe keeps Python's StepLR, as a
Python loop would. With the schedule moved to LibTorch's timing (the first ``scheduler.step()``
skipped, a scratch test not shipped here) all 14 losses the report holds are bitwise equal to the
C++ reference's (steps 0-13): nothing else differs in the computation. ``clip_grad_norm_``'s
reciprocal-vs-division difference (docs/python.md) does not show: max_norm is 1.0, a power of 2.
"""
from __future__ import annotations

import copy
import hashlib
import io
import math
import os
import random
import tempfile
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Tuple

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel
import torch.utils.checkpoint
from torch.utils.data import DataLoader, Dataset, Sampler, TensorDataset

import torchconform

# --- the configuration (tc::ref::TrainConfig's defaults) ----------------------------------------
TRAIN_SIZE, EVAL_SIZE = 96, 64
CLASSES, IMAGE_SIZE, CHANNELS = 4, 16, 16
TRAIN_DATA_SEED, EVAL_DATA_SEED = 20240601, 777
BATCH_SIZE, EVAL_BATCH_SIZE = 16, 32
LR, MOMENTUM, WEIGHT_DECAY = 0.05, 0.9, 5e-4
LR_STEP_SIZE, LR_GAMMA = 3, 0.8
CLIP_NORM = 1.0
DROPOUT = 0.5
PREFETCH = 4
U64 = (1 << 64) - 1


# --- seeding (the seeds' set_seed) ---------------------------------------------------------------
def set_seed(seed: int = 42, deterministic: bool = False) -> None:
    """Seeds Python, NumPy (when installed) and torch (CPU and every CUDA device); determinism."""
    random.seed(seed)
    try:
        import numpy as np  # not every venv has it
        np.random.seed(seed % 2**32)
    except ImportError:
        pass
    if deterministic and torch.cuda.is_available():
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # read by cuBLAS before its first call
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    torch.use_deterministic_algorithms(deterministic)
    torch.backends.cudnn.deterministic = deterministic
    torch.backends.cudnn.benchmark = not deterministic


def seed_worker(worker_id: int) -> None:
    """``worker_init_fn``: each worker's Python and NumPy generators from the seed torch gave it
    (the loader's ``generator`` decides that seed)."""
    worker_seed = torch.initial_seed() % 2**32
    random.seed(worker_seed)
    try:
        import numpy as np
        np.random.seed(worker_seed)
    except ImportError:
        pass


def default_workers(host_trains: bool) -> int:
    """One worker per core, minus one when the training thread computes on the host; 1..8."""
    cores = os.cpu_count() or 1
    return max(1, min(8, cores - (1 if host_trains else 0)))


# --- data (reference/data.cpp) -------------------------------------------------------------------
def synthetic_images(size: int, seed: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """(N, 3, S, S) float32 images and (N,) int64 labels: per-class patterns plus noise, fixed by
    ``seed`` like files on disk."""
    g = torch.Generator().manual_seed(seed)
    prototypes = torch.randn(CLASSES, 3, IMAGE_SIZE, IMAGE_SIZE, generator=g)  # (C, 3, S, S)
    labels = torch.arange(size, dtype=torch.long).remainder(CLASSES)          # balanced classes
    noise = torch.randn(size, 3, IMAGE_SIZE, IMAGE_SIZE, generator=g)          # (N, 3, S, S)
    return prototypes.index_select(0, labels) + 1.5 * noise, labels


class MT19937_64:
    """libstdc++'s ``std::mt19937_64`` with the two distributions ``augment`` uses, bit for bit."""

    def __init__(self, seed: int) -> None:
        mt = [seed & U64]
        for i in range(1, 312):
            mt.append((6364136223846793005 * (mt[-1] ^ (mt[-1] >> 62)) + i) & U64)
        self.mt, self.index = mt, 312

    def _twist(self) -> None:
        mt = self.mt
        for i in range(312):
            y = (mt[i] & 0xFFFFFFFF80000000) | (mt[(i + 1) % 312] & 0x7FFFFFFF)
            mt[i] = mt[(i + 156) % 312] ^ (y >> 1) ^ (0xB5026F5AA96619E9 if y & 1 else 0)
        self.index = 0

    def __call__(self) -> int:
        if self.index >= 312:
            self._twist()
        y = self.mt[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        return (y ^ (y >> 43)) & U64

    def bernoulli(self, p: float) -> bool:
        """``std::bernoulli_distribution(p)``: generate_canonical<double, 53> < p."""
        u = float(self()) / 18446744073709551616.0
        return min(u, math.nextafter(1.0, 0.0)) < p

    def uniform_int(self, a: int, b: int) -> int:
        """``std::uniform_int_distribution<int64_t>(a, b)``: Lemire's method on 128 bits."""
        n = b - a + 1
        product = self() * n
        low = product & U64
        if low < n:
            threshold = ((1 << 64) - n) % n
            while low < threshold:
                product = self() * n
                low = product & U64
        return (product >> 64) + a


def batch_seed(epoch_seed: int, batch: int) -> int:
    """The epoch's seed and a batch's position mixed into the batch's augmentation seed (splitmix64)."""
    z = (epoch_seed + 0x9E3779B97F4A7C15 * (batch + 1)) & U64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & U64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & U64
    return z ^ (z >> 31)


def augment(images: torch.Tensor, seed: int) -> torch.Tensor:
    """Random horizontal flip and shift, brightness and Gaussian noise, all drawn from ``seed``."""
    rng = MT19937_64(seed)
    out = []
    for img in images:  # (3, S, S)
        if rng.bernoulli(0.5):
            img = img.flip(2)
        shifts = (rng.uniform_int(-2, 2), rng.uniform_int(-2, 2))
        out.append(img.roll(shifts, (1, 2)))
    g = torch.Generator().manual_seed(seed ^ 0xA5A5A5A5A5A5A5A5)
    batch = torch.stack(out)                                            # (B, 3, S, S)
    gain = 0.8 + 0.4 * torch.rand(batch.size(0), 1, 1, 1, generator=g)  # (B, 1, 1, 1)
    return batch * gain + 0.1 * torch.randn(batch.shape, generator=g)


class AugmentedBatches(Dataset):
    """The training set, read a batch at a time: item (indices, seed) is that batch augmented."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        self.images, self.labels = images, labels
        self.transform = None  # data_saturation's probe: applied to the inputs as read, before augment

    def __len__(self) -> int:
        return self.labels.size(0)

    def augment(self, images: torch.Tensor, seed: int) -> torch.Tensor:
        return augment(images, seed)

    def __getitem__(self, key: Tuple[List[int], int]) -> Tuple[torch.Tensor, torch.Tensor]:
        indices, seed = key
        idx = torch.tensor(indices, dtype=torch.long)
        images = self.images.index_select(0, idx)  # (b, 3, S, S)
        if self.transform is not None:
            images = self.transform(images)
        return self.augment(images, seed), self.labels.index_select(0, idx)


class SeededBatchSampler(Sampler):
    """Which samples make each batch: the epoch's permutation from the loader's own generator,
    drawn at ``set_epoch``, with the epoch's augmentation seed; iterates from ``position`` on, so a
    resumed run continues mid-epoch. Yields (indices, augmentation seed) per batch."""

    def __init__(self, dataset_size: int, batch_size: int, generator: torch.Generator) -> None:
        self.dataset_size, self.batch_size, self.generator = dataset_size, batch_size, generator
        self.epoch = -1
        self.permutation: Optional[torch.Tensor] = None
        self.epoch_seed = 0
        self.position = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch, self.position = epoch, 0
        self.permutation = torch.randperm(self.dataset_size, generator=self.generator)
        self.epoch_seed = int(torch.randint(2**63 - 1, (1,), generator=self.generator).item())

    def __len__(self) -> int:
        return self.dataset_size // self.batch_size  # drop_last

    def __iter__(self) -> Iterator[Tuple[List[int], int]]:
        perm, seed = self.permutation.tolist(), self.epoch_seed
        for b in range(self.position, len(self)):
            yield perm[b * self.batch_size:(b + 1) * self.batch_size], batch_seed(seed, b)

    def state_dict(self) -> Dict[str, object]:
        return {"epoch": self.epoch, "permutation": self.permutation, "epoch_seed": self.epoch_seed,
                "generator": self.generator.get_state()}

    def load_state_dict(self, state: Dict[str, object]) -> None:
        self.epoch, self.permutation = int(state["epoch"]), state["permutation"]
        self.epoch_seed = int(state["epoch_seed"])
        self.generator.set_state(state["generator"])


class RankShareSampler(SeededBatchSampler):
    """Data-parallel: every rank draws the same epoch order (the same seeded generator) and takes its
    share of each batch, samples ``rank, rank + world, ...``: the ranks together see each batch
    once, and their averaged gradients are the whole batch's."""

    def __init__(self, dataset_size: int, batch_size: int, generator: torch.Generator, rank: int, world: int) -> None:
        super().__init__(dataset_size, batch_size, generator)
        self.rank, self.world = rank, world

    def __iter__(self) -> Iterator[Tuple[List[int], int]]:
        for indices, seed in super().__iter__():
            yield indices[self.rank::self.world], seed


# --- the model (reference/model.cpp, the seeds' ImageClassifier) --------------------------------
class ImageClassifier(nn.Module):
    def __init__(self, num_classes: int, image_size: int, dropout: float = 0.5, channels: int = 16) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, channels, 3, padding=1), nn.BatchNorm2d(channels), nn.ReLU(),
                                      nn.MaxPool2d(2))
        half = image_size // 2
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(channels * half * half, num_classes))
        self.recompute_features = False  # activation checkpointing of the features (training only)

    def extract_features(self, x: torch.Tensor) -> torch.Tensor:
        if self.recompute_features and self.training:
            return torch.utils.checkpoint.checkpoint(self.features, x, use_reentrant=False)
        return self.features(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.extract_features(x)  # (B, C, H//2, W//2)
        x = x.flatten(start_dim=1)    # (B, C * H//2 * W//2)
        return self.classifier(x)     # (B, num_classes)


def init_weights(m: nn.Module) -> None:
    """Explicit initialisation (the defaults differ between layer types and change between releases)."""
    if isinstance(m, nn.Conv2d):
        nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    elif isinstance(m, nn.BatchNorm2d):
        nn.init.ones_(m.weight)
        nn.init.zeros_(m.bias)
    elif isinstance(m, nn.Linear):
        nn.init.normal_(m.weight, 0.0, 0.01)
        nn.init.zeros_(m.bias)


INTEGRITY_KEY = "sha256"


def state_digest(state: Dict[str, object]) -> str:
    """The sha256 of ``state``'s torch.save serialisation (the same content serialises to the same
    bytes, so the digest of a state loaded back equals the digest it was saved with)."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return hashlib.sha256(buffer.getvalue()).hexdigest()


# --- the recipe ----------------------------------------------------------------------------------
class PythonReference(torchconform.Run):
    """every practice of the seeds done right, in Python (python/reference/reference.py)"""

    name = "py_reference"
    control = True  # the suite's own correct Python recipe (its variants below derive from it)
    data_parallel_modes = ("fsdp", "ddp")  # setup() honours RunOptions.data_parallel (parallelize())
    amp_dtypes = ("bf16", "fp16")  # setup() honours RunOptions.amp (amp_forward(), optimisation_step())
    does_activation_checkpointing = True  # setup() honours RunOptions.activation_checkpointing

    # ---- practice slots (the variants replace one each) ----
    def seed_everything(self) -> None:
        set_seed(self.options.seed, self.options.deterministic)

    def make_model(self) -> nn.Module:
        model = ImageClassifier(CLASSES, IMAGE_SIZE, DROPOUT, CHANNELS)
        model.apply(init_weights)
        return model

    def to_device(self, model: nn.Module) -> nn.Module:
        return model.to(self.device)

    def compile_model(self, model: nn.Module) -> nn.Module:
        """What the step's forward runs: the model compiled when ``options.compile`` (the seeds'
        ``model = torch.compile(model)``), else the model itself. ``self.model`` stays the plain
        module: its parameters, state dict and checkpoint carry no ``_orig_mod.`` prefix.
        Deterministic runs draw dropout's random numbers as eager does (Inductor's own generator
        otherwise, whose masks differ from eager's: the check torch_compile compares the two)."""
        if not self.options.compile:
            return model
        torch._inductor.config.fallback_random = self.options.deterministic
        return torch.compile(model)

    def parallelize(self, model: nn.Module) -> nn.Module:
        """What the step's forward runs when ``options.data_parallel`` asks for data-parallel
        training (``self.model`` stays the module whose parameters and state dict are the run's):
        "ddp" wraps it in DistributedDataParallel (every rank a replica, gradients all-reduced in
        backward); "fsdp" shards it with FSDP2's ``fully_shard``, each block first (features,
        classifier: each gathered for its forward and backward and freed after), then the root, so
        that every parameter is sharded and the root schedules the blocks' communication."""
        mode = self.options.data_parallel
        if mode == "ddp":
            return DistributedDataParallel(model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        if mode == "fsdp":
            # The sharding APIs are imported where a sharded run uses them (here and in the state
            # dicts below): with DTensor and sympy behind them they took 0.56 s of every import of
            # this module (python -X importtime), paid by each process that never shards, a loader
            # worker's fork server among them (worker_context).
            from torch.distributed.fsdp import fully_shard
            for block in (model.features, model.classifier):
                fully_shard(block)
            fully_shard(model)
        elif mode:
            raise NotImplementedError(f"data_parallel={mode!r}")
        return model

    def make_optimizer(self, parameters: Iterable[torch.Tensor]) -> torch.optim.Optimizer:
        return torch.optim.SGD(parameters, lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)

    def build_training(self, model: nn.Module) -> Tuple[nn.Module, torch.optim.Optimizer]:
        """The step's module and the optimizer, in that order: ``fully_shard`` replaces the module's
        parameters with sharded ones, so the optimizer is made from the model as it trains."""
        train_model = self.compile_model(self.parallelize(model))
        return train_model, self.make_optimizer(model.parameters())

    def make_loader(self) -> DataLoader:
        # The loader's own generators, seeded: the sampler shuffles with one, the other picks the
        # workers' base seed (each iterator draws one number from it). Neither is the global
        # generator, which the dropout masks draw from.
        self.sampler_generator = torch.Generator().manual_seed(self.options.seed)
        self.loader_generator = torch.Generator().manual_seed(self.options.seed)
        if self.options.data_parallel:
            self.sampler = RankShareSampler(len(self.train_set), BATCH_SIZE, self.sampler_generator,
                                            dist.get_rank(), dist.get_world_size())
        else:
            self.sampler = SeededBatchSampler(len(self.train_set), BATCH_SIZE, self.sampler_generator)
        return self.build_loader(self.train_set, self.sampler, self.loader_generator)

    def loader_workers(self, host_trains: bool) -> int:
        return default_workers(host_trains)

    def build_loader(self, dataset: Dataset, sampler: Sampler, generator: torch.Generator,
                     workers: Optional[int] = None, prefetch: Optional[int] = None,
                     for_probe: bool = False) -> DataLoader:
        if workers is None:
            workers = self.loader_workers(host_trains=self.device.type == "cpu" and not for_probe)
        with_workers = {"persistent_workers": True, "prefetch_factor": prefetch or PREFETCH,
                        "multiprocessing_context": worker_context()} if workers > 0 else {}
        return DataLoader(dataset, batch_size=None, sampler=sampler, num_workers=workers,
                          pin_memory=self.device.type == "cuda", worker_init_fn=seed_worker, generator=generator,
                          **with_workers)

    def data_loader(self, epoch: int = 0, batches: Optional[int] = None, workers: Optional[int] = None,
                    prefetch: Optional[int] = None, transform=None) -> DataLoader:
        # As setup() builds it, for epoch `epoch`: each epoch's set_epoch draws in turn. Its worker
        # count is the one for a device that leaves the host's cores to the loader (the probe's
        # device is a simulated accelerator), as the C++ reference's LoaderProbe does.
        sampler = SeededBatchSampler(len(self.train_set), BATCH_SIZE,
                                     torch.Generator().manual_seed(self.options.seed))
        for e in range(epoch + 1):
            sampler.set_epoch(e)
        dataset = copy.copy(self.train_set)
        dataset.transform = transform
        return self.build_loader(dataset, torchconform.RepeatedBatches(sampler, batches) if batches else sampler,
                                 torch.Generator().manual_seed(self.options.seed), workers, prefetch, for_probe=True)

    def begin_epoch(self) -> None:
        self.model.train()
        self.sampler.set_epoch(self.epoch)

    def forward_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.amp_forward(lambda: F.cross_entropy(self.train_model(x), y))

    def amp_forward(self, loss_of: Callable[[], torch.Tensor]) -> torch.Tensor:
        """The forward and loss under ``torch.autocast`` in the dtype asked (the seeds' Pass: the
        loss is computed inside the region too), times ``amp.loss_weight``; plain fp32 when off."""
        with torch.autocast(self.device.type, dtype=self.amp.torch_dtype, enabled=self.amp.enabled):
            loss = loss_of()
        return loss if self.amp.loss_weight == 1.0 else loss * self.amp.loss_weight

    def step_parameters(self) -> List[torch.Tensor]:
        """What the step clips: the model's parameters (a workload's, under amp_step_on)."""
        return list(self.model.parameters()) if self._step_parameters is None else list(self._step_parameters.values())

    def optimisation_step(self, loss: torch.Tensor) -> None:
        """zero_grad(set_to_none) -> backward of the scaled loss -> unscale_ -> clip -> step ->
        update (the seeds' GradScaler code; with the scaler disabled, fp32 and bf16, scale() returns
        the loss, unscale_() and update() do nothing and step() is the optimizer's)."""
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.after_backward(self._step_parameters)  # the check reads the raw gradients here (amp)
        self.scaler.unscale_(self.optimizer)  # clip the true gradients, not the scaled ones
        torch.nn.utils.clip_grad_norm_(self.step_parameters(), max_norm=CLIP_NORM)
        self.scaler.step(self.optimizer)  # skipped when a gradient is inf or NaN
        self.scaler.update()

    def model_and_optimizer_state(self) -> Tuple[Dict[str, object], Dict[str, object]]:
        """Their state dicts, whole. Sharded (FSDP): gathered to rank 0 on the CPU
        (``full_state_dict`` + ``cpu_offload``: the other ranks get empty dicts), so that the file is
        the unsharded model a bare one loads (a collective: every rank calls it)."""
        if self.options.data_parallel == "fsdp":
            from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                                 get_optimizer_state_dict)  # see parallelize
            whole = StateDictOptions(full_state_dict=True, cpu_offload=True)
            return (get_model_state_dict(self.model, options=whole),
                    get_optimizer_state_dict(self.model, self.optimizer, options=whole))
        return self.model.state_dict(), self.optimizer.state_dict()

    def restore_model_and_optimizer(self, model_state: Dict[str, object], optimizer_state: Dict[str, object]) -> None:
        if self.options.data_parallel == "fsdp":  # every rank read the whole state; each keeps its shard
            from torch.distributed.checkpoint.state_dict import (StateDictOptions, set_model_state_dict,
                                                                 set_optimizer_state_dict)  # see parallelize
            whole = StateDictOptions(full_state_dict=True)
            set_model_state_dict(self.model, model_state, options=whole)
            set_optimizer_state_dict(self.model, self.optimizer, optimizer_state, options=whole)
            return
        self.model.load_state_dict(model_state)
        self.optimizer.load_state_dict(optimizer_state)

    def writes_checkpoints(self) -> bool:
        """Data-parallel: rank 0 alone writes (the state is whole there); the others wait for it."""
        return not self.options.data_parallel or dist.get_rank() == 0

    def checkpoint_state(self) -> Dict[str, object]:
        model_state, optimizer_state = self.model_and_optimizer_state()
        return {
            "epoch": self.epoch,
            "step": self.step,
            "model_state_dict": model_state,
            "optimizer_state_dict": optimizer_state,
            "scheduler_state_dict": self.scheduler.state_dict(),
            "scaler_state_dict": self.scaler.state_dict(),
            "rng": self.rng_state(),
            "sampler": {"position": self.position, **self.sampler.state_dict()},
        }

    def write_checkpoint(self, state: Dict[str, object], path: str) -> None:
        """Atomically: a temporary file beside ``path``, fsynced, renamed over it; with the sha256
        of the state's serialisation, which :meth:`read_checkpoint` checks. (torch.save alone,
        the seeds' Pass code, does not notice a flipped bit in a tensor: 176 of 200 single-bit
        flips of a small state loaded as other values, measured with torch 2.15.0.)"""
        state = {**state, INTEGRITY_KEY: state_digest(state)}
        directory = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".ckpt-", dir=directory)
        try:
            with os.fdopen(fd, "wb") as f:
                torch.save(state, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def read_checkpoint(self, path: str) -> Dict[str, object]:
        state = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(state, dict) or state.pop(INTEGRITY_KEY, None) != state_digest(state):
            raise ValueError(f"{path}: the checkpoint's content does not match its sha256: corrupted")
        return state

    # ---- tc::Run ----
    def setup(self, options: torchconform.RunOptions) -> None:
        self.options = options
        self.amp = options.amp
        self.device = torch.device(options.device)
        if options.data_parallel and self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))  # one GPU per rank
        self.seed_everything()
        self.train_set = AugmentedBatches(*synthetic_images(TRAIN_SIZE, TRAIN_DATA_SEED))
        self.eval_images, self.eval_labels = synthetic_images(EVAL_SIZE, EVAL_DATA_SEED)
        self.loader = self.make_loader()
        self.model = self.to_device(self.make_model())
        self.model.recompute_features = options.activation_checkpointing
        # The step's forward (data-parallel, compiled, on request) and the optimizer.
        self.train_model, self.optimizer = self.build_training(self.model)
        self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=LR_STEP_SIZE, gamma=LR_GAMMA)
        self.scaler = self.amp.grad_scaler(self.device.type)  # enabled for fp16 only
        self._step_parameters: Optional[Dict[str, torch.Tensor]] = None  # a workload's (amp_step_on)
        self.epoch, self.position, self.step = -1, 0, 0
        self.batches: Optional[Iterator] = None
        self._last_batch: Optional[Tuple[torch.Tensor, torch.Tensor]] = None

    def next_batch(self) -> Tuple[torchconform.StepRecord, torch.Tensor, torch.Tensor]:
        """The step's batch (host tensors) and its record: a new epoch (begin_epoch()) when the last
        one is done, the loader resumed at the sampler's position."""
        if self.epoch < 0 or self.position >= self.steps_per_epoch():
            self.epoch += 1
            self.position = 0
            self.batches = None
            self.begin_epoch()
        if self.batches is None:
            self.sampler.position = self.position
            self.batches = iter(self.loader)
        images, labels = next(self.batches)
        self.position += 1
        record = torchconform.StepRecord(step=self.step, epoch=self.epoch, lr=self.optimizer.param_groups[0]["lr"],
                                         training_mode=self.model.training)
        return record, images, labels

    def train_step(self) -> torchconform.StepRecord:
        record, images, labels = self.next_batch()
        x = images.to(self.device, non_blocking=True)  # (B, 3, S, S)
        y = labels.to(self.device, non_blocking=True)  # (B,)
        self._last_batch = (x.clone(), y)
        loss = self.forward_loss(x, y)
        self.optimisation_step(loss)
        self.scheduler.step()
        self.step += 1
        record.loss = loss.item()
        return record

    @torch.no_grad()
    def evaluate(self) -> torchconform.EvalResult:
        self.model.eval()
        return self.eval_loop()

    def eval_loop(self) -> torchconform.EvalResult:
        # Its own generator: a DataLoader draws a seed for each iterator, from the global generator
        # when it has none, which would move the dropout masks of the training that follows.
        loader = DataLoader(TensorDataset(self.eval_images, self.eval_labels), batch_size=EVAL_BATCH_SIZE,
                            generator=torch.Generator())
        loss_sum, correct, logits = 0.0, 0, []
        for x, y in loader:
            x, y = x.to(self.device), y.to(self.device)
            out = self.model(x)  # (b, classes)
            loss_sum += F.cross_entropy(out, y, reduction="sum").item()
            correct += (out.argmax(1) == y).sum().item()
            logits.append(out)
        n = len(loader.dataset)
        return torchconform.EvalResult(loss=loss_sum / n, accuracy=correct / n, logits=torch.cat(logits))

    def save_checkpoint(self, path: str) -> None:
        state = self.checkpoint_state()
        if self.writes_checkpoints():
            self.write_checkpoint(state, path)
        if self.options.data_parallel:
            dist.barrier()  # the file is whole on disk before any rank returns (and may read it)

    def load_checkpoint(self, path: str) -> None:
        state = self.read_checkpoint(path)  # every byte read and unpickled before anything changes
        if self.options.data_parallel == "fsdp":
            self.restore(state)  # (no rollback copy: it would gather the whole state on every rank)
            return
        before = _clone(self.checkpoint_state())
        try:
            self.restore(state)
        except BaseException:
            self.restore(before)  # a checkpoint that does not apply whole leaves the run as it was
            raise

    def restore(self, state: Dict[str, object]) -> None:
        self.restore_model_and_optimizer(state["model_state_dict"], state["optimizer_state_dict"])
        self.scheduler.load_state_dict(state["scheduler_state_dict"])
        if "scaler_state_dict" in state:
            self.scaler.load_state_dict(state["scaler_state_dict"])
        self.epoch, self.step = int(state["epoch"]), int(state["step"])
        self.set_rng_state(state["rng"])
        sampler = state["sampler"]
        self.position = int(sampler["position"])
        self.sampler.load_state_dict(sampler)
        self.batches = None  # the next step starts the loader at the saved position

    def rng_state(self) -> Dict[str, object]:
        state = {"torch_cpu": torch.get_rng_state(), "python": random.getstate(),
                 "loader": self.loader_generator.get_state()}
        if self.device.type == "cuda":
            state["torch_cuda"] = torch.cuda.get_rng_state(self.device)
        return state

    def set_rng_state(self, state: Dict[str, object]) -> None:
        torch.set_rng_state(state["torch_cpu"])
        random.setstate(_as_random_state(state["python"]))
        self.loader_generator.set_state(state["loader"])
        if self.device.type == "cuda":
            torch.cuda.set_rng_state(state["torch_cuda"], self.device)

    def steps_per_epoch(self) -> int:
        return TRAIN_SIZE // BATCH_SIZE

    def parameters(self) -> torchconform.NamedTensors:
        return dict(self.model.named_parameters())

    def buffers(self) -> torchconform.NamedTensors:
        return dict(self.model.named_buffers())

    def optimizer_state(self) -> torchconform.NamedTensors:
        """The optimizer's state tensors, and an enabled GradScaler's scale and growth tracker (fp16),
        as ReferenceRun::optimizer_state gives them: they decide the steps to come, so a resume that
        loses them differs even where no later step overflows (the unscaled updates are bitwise the
        same: the scales are powers of two)."""
        out = {}
        for name, p in self.model.named_parameters():
            for key, value in self.optimizer.state.get(p, {}).items():
                if isinstance(value, torch.Tensor):
                    out[f"{name}.{key}"] = value
        if self.scaler.is_enabled():
            state = self.scaler.state_dict()
            out["grad_scaler.scale"] = torch.tensor(float(state["scale"]), dtype=torch.float32)
            out["grad_scaler.growth_tracker"] = torch.tensor(int(state["_growth_tracker"]), dtype=torch.int64)
        return out

    # ---- optional probes ----
    def example_input(self, batch: int) -> torch.Tensor:
        return self.eval_images[:batch].to(self.device)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        was_training = self.model.training
        self.model.eval()
        with torch.no_grad():
            out = self.model(x)
        self.model.train(was_training)
        return out

    def forward_train(self, x: torch.Tensor) -> torch.Tensor:
        self.model.train()
        return self.model(x)

    def last_batch(self) -> Tuple[torch.Tensor, torch.Tensor]:
        if self._last_batch is None:
            raise RuntimeError("last_batch() before any train_step()")
        return self._last_batch

    def training_loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(output, target)

    def clip_norm(self) -> float:
        return CLIP_NORM

    def make_distributed(self) -> torchconform.Run:
        """The seeds' DDP code (ddp_reference.py): the check ``distributed`` trains it under torchrun.
        (Not this class: its dropout and batch norm make each rank's gradients other than one
        process's on the whole batch, which the check computes.)"""
        from ddp_reference import PythonDdpReference
        return PythonDdpReference()

    def bare_model(self) -> nn.Module:
        # The optimizer() probe is the attribute self.optimizer (a torch.optim.SGD). The bare
        # model's initialisation draws on a generator of its own, not the run's.
        with torch.random.fork_rng(devices=[]):
            return self.make_model()

    def amp_step_on(self, forward, parameters, inputs, targets):
        """This run given over to amp's workload (a run made for it alone): the workload gets an
        optimizer from make_optimizer() and a fresh scaler in this run's own attributes, and each
        step is this recipe's amp_forward() and optimisation_step() on it."""
        self._step_parameters = dict(parameters)
        self.optimizer = self.make_optimizer(self._step_parameters.values())
        self.scaler = self.amp.grad_scaler(inputs.device.type)

        def step() -> float:
            loss = self.amp_forward(lambda: F.cross_entropy(forward(inputs), targets))
            self.optimisation_step(loss)
            return loss.item()
        return step

    def declared_init(self) -> List[torchconform.InitSpec]:
        specs = []
        for name, t in self.model.named_parameters():
            if t.dim() == 4:  # conv weight (out, in, kh, kw): kaiming normal, fan_out, relu
                fan_out = t.size(0) * t.size(2) * t.size(3)
                specs.append(torchconform.InitSpec(name, "normal", 0.0, math.sqrt(2.0 / fan_out)))
            elif t.dim() == 2:  # linear weight
                specs.append(torchconform.InitSpec(name, "normal", 0.0, 0.01))
            elif name == "features.1.weight":  # BatchNorm weight
                specs.append(torchconform.InitSpec(name, "constant", 1.0))
            else:  # biases
                specs.append(torchconform.InitSpec(name, "constant", 0.0))
        return specs


def worker_context():
    """The loader workers' start method: a fork server that has imported torch once. The process
    that runs the recipe may be multi-threaded (torchconform is a C++ program), where ``fork`` is
    unsafe, and ``spawn`` imports torch anew for every worker of every run (seconds each). A worker
    unpickles the dataset, whose class is defined here, so it imports this module: its imports at
    the top are the server's preload, and the sharding APIs, which a worker never uses, are imported
    where they are used (``parallelize``). Not this module by name: the server's
    sys.path may find another ``reference`` first (a folder of that name where it runs)."""
    import multiprocessing
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch.nn.parallel", "torch.utils.checkpoint", "torch.utils.data"])
    return ctx


def _clone(obj):
    if isinstance(obj, torch.Tensor):
        return obj.clone()
    if isinstance(obj, dict):
        return {k: _clone(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_clone(v) for v in obj]
    return obj


def _as_random_state(state):
    """``random.getstate()`` as it came back from a load (tuples may come back as lists)."""
    version, internal, gauss = state
    return int(version), tuple(int(v) for v in internal), gauss
