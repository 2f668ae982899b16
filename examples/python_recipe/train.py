"""Our training script: a small CNN that tells four stroke patterns apart in noisy 16x16 RGB images.

    python train.py --epochs 6 --out runs/strokes                # train, a checkpoint per epoch
    python train.py --epochs 6 --out runs/strokes --resume runs/strokes/last.pt  # after a crash

The data is synthetic (each class is a stroke drawn at a random offset, plus Gaussian noise), so the
script runs anywhere in seconds; swap `StrokeImages` for your dataset. Everything else is the shape
of a real loop: a seeded DataLoader over an epoch-seeded sampler, SGD with momentum and weight
decay, a warm-up then cosine learning rate stepped every iteration, gradient clipping, random
half turns, evaluation on a held-out split, and checkpoints that resume mid-epoch.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import os
import random
from typing import Dict, Iterator, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, Sampler
from torch.utils.checkpoint import checkpoint


@dataclasses.dataclass
class Config:
    image_size: int = 16
    channels: int = 3
    classes: int = 4
    train_samples: int = 384
    val_samples: int = 128
    batch_size: int = 32
    epochs: int = 6
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 5e-4
    warmup_steps: int = 10
    max_grad_norm: float = 2.0
    turn_prob: float = 0.5
    noise: float = 0.35
    num_workers: int = 0
    seed: int = 1234
    checkpoint_activations: bool = False


def seed_everything(seed: int, deterministic: bool = True) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False


# --- data ---------------------------------------------------------------------------------------
class StrokeImages(Dataset):
    """(C, S, S) images of one of four strokes (-, |, \\, /) in a random colour at a random offset,
    in noise."""

    def __init__(self, samples: int, cfg: Config, seed: int):
        g = torch.Generator().manual_seed(seed)
        s = cfg.image_size
        self.labels = torch.randint(0, cfg.classes, (samples,), generator=g)
        images = cfg.noise * torch.randn(samples, cfg.channels, s, s, generator=g)
        offsets = torch.randint(-s // 4, s // 4 + 1, (samples,), generator=g)
        colours = 0.5 + torch.rand(samples, cfg.channels, 1, generator=g)
        idx = torch.arange(s)
        for i in range(samples):
            o, label = int(offsets[i]), int(self.labels[i])
            c = s // 2 + o
            if label == 0:
                images[i, :, c, :] += colours[i]
            elif label == 1:
                images[i, :, :, c] += colours[i]
            elif label == 2:
                images[i, :, idx, (idx + o) % s] += colours[i]
            else:
                images[i, :, idx, (s - 1 - idx + o) % s] += colours[i]
        self.images = images

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> Tuple[torch.Tensor, torch.Tensor]:
        return self.images[i], self.labels[i]


class EpochShuffle(Sampler):
    """A shuffle that depends on (seed, epoch) only, so a run resumed mid-epoch sees the same order:
    `set_epoch(e)` picks the epoch, `skip` the batches already trained on."""

    def __init__(self, size: int, seed: int, batch_size: int):
        self.size, self.seed, self.batch_size = size, seed, batch_size
        self.epoch, self.skip = 0, 0

    def set_epoch(self, epoch: int, skip_batches: int = 0) -> None:
        self.epoch, self.skip = epoch, skip_batches

    def __iter__(self) -> Iterator[int]:
        g = torch.Generator().manual_seed(self.seed * 1000 + self.epoch)
        order = torch.randperm(self.size, generator=g).tolist()
        return iter(order[self.skip * self.batch_size:])

    def __len__(self) -> int:
        return self.size - self.skip * self.batch_size


# --- model --------------------------------------------------------------------------------------
class StrokeNet(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(cfg.channels, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
        )
        self.dropout = nn.Dropout(0.2)
        self.head = nn.Linear(32, cfg.classes)
        self.checkpoint_activations = cfg.checkpoint_activations

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.checkpoint_activations and self.training and torch.is_grad_enabled():
            h = checkpoint(self.features, x, use_reentrant=False)
        else:
            h = self.features(x)
        return self.head(self.dropout(torch.flatten(h, 1)))


HEAD_STD = 0.01


def init_weights(model: nn.Module) -> None:
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, HEAD_STD)
            nn.init.zeros_(m.bias)


def warmup_cosine(cfg: Config, total_steps: int):
    def factor(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        progress = (step - cfg.warmup_steps) / max(1, total_steps - cfg.warmup_steps)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
    return factor


# --- training -----------------------------------------------------------------------------------
class Trainer:
    """Model, optimizer, schedule and data of one run, and where it is in it."""

    def __init__(self, cfg: Config, device: str = "cpu"):
        self.cfg = cfg
        self.device = torch.device(device)
        self.train_set = StrokeImages(cfg.train_samples, cfg, seed=cfg.seed)
        self.val_set = StrokeImages(cfg.val_samples, cfg, seed=cfg.seed + 1)
        self.sampler = EpochShuffle(len(self.train_set), cfg.seed, cfg.batch_size)
        self.model = StrokeNet(cfg)
        init_weights(self.model)
        self.model.to(self.device)
        decay = [p for n, p in self.model.named_parameters() if p.ndim > 1]
        no_decay = [p for n, p in self.model.named_parameters() if p.ndim <= 1]
        self.optimizer = torch.optim.SGD(
            [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=cfg.lr, momentum=cfg.momentum, nesterov=True)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, warmup_cosine(cfg, cfg.epochs * self.steps_per_epoch()))
        self.epoch, self.batch_in_epoch, self.step = 0, 0, 0
        self._batches: Optional[Iterator] = None
        self.last_inputs: Optional[torch.Tensor] = None
        self.last_targets: Optional[torch.Tensor] = None

    def steps_per_epoch(self) -> int:
        return len(self.train_set) // self.cfg.batch_size  # drop_last

    def _loader(self) -> DataLoader:
        self.sampler.set_epoch(self.epoch, self.batch_in_epoch)
        return DataLoader(self.train_set, batch_size=self.cfg.batch_size, sampler=self.sampler,
                          drop_last=True, num_workers=self.cfg.num_workers,
                          pin_memory=self.device.type == "cuda",
                          # its own generator: building the loader draws nothing from torch's global RNG
                          generator=torch.Generator().manual_seed(self.cfg.seed + self.epoch))

    def next_batch(self) -> Tuple[torch.Tensor, torch.Tensor]:
        if self._batches is None:
            self._batches = iter(self._loader())
        try:
            return next(self._batches)
        except StopIteration:
            self.epoch, self.batch_in_epoch = self.epoch + 1, 0
            self._batches = iter(self._loader())
            return next(self._batches)

    def augment(self, x: torch.Tensor) -> torch.Tensor:
        turn = torch.rand(x.shape[0]) < self.cfg.turn_prob
        return torch.where(turn.view(-1, 1, 1, 1).to(x.device), x.flip(-2, -1), x)  # turn by 180 degrees

    def loss_fn(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, y, label_smoothing=0.05)

    def train_step(self) -> Dict[str, float]:
        x, y = self.next_batch()
        x = self.augment(x.to(self.device, non_blocking=True))
        y = y.to(self.device, non_blocking=True)
        self.last_inputs, self.last_targets = x.clone(), y
        self.model.train()
        lr = self.optimizer.param_groups[0]["lr"]
        loss = self.loss_fn(self.model(x), y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.max_grad_norm)
        self.optimizer.step()
        self.scheduler.step()
        stats = {"step": self.step, "epoch": self.epoch, "loss": loss.item(), "lr": lr}
        self.step += 1
        self.batch_in_epoch += 1
        return stats

    @torch.no_grad()
    def evaluate(self) -> Dict[str, object]:
        was_training = self.model.training
        self.model.eval()
        x = self.val_set.images.to(self.device)
        y = self.val_set.labels.to(self.device)
        logits = self.model(x)
        self.model.train(was_training)
        return {"loss": F.cross_entropy(logits, y).item(),
                "accuracy": (logits.argmax(1) == y).float().mean().item(), "logits": logits}

    # --- checkpoints ---
    def state_dict(self) -> Dict[str, object]:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "position": {"epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch, "step": self.step},
            "rng": {"torch": torch.get_rng_state(), "python": random.getstate(),
                    "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []},
            "config": dataclasses.asdict(self.cfg),
        }

    def load_state_dict(self, state: Dict[str, object]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        pos = state["position"]
        self.epoch, self.batch_in_epoch, self.step = pos["epoch"], pos["batch_in_epoch"], pos["step"]
        torch.set_rng_state(state["rng"]["torch"])
        random.setstate(state["rng"]["python"])
        if state["rng"]["cuda"]:
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])
        self._batches = None  # the loader restarts at the saved position

    def save(self, path: str) -> None:
        tmp = f"{path}.tmp"
        torch.save(self.state_dict(), tmp)
        os.replace(tmp, path)  # a crash mid-write leaves the previous checkpoint intact

    def load(self, path: str) -> None:
        self.load_state_dict(torch.load(path, map_location=self.device, weights_only=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=Config.epochs)
    parser.add_argument("--seed", type=int, default=Config.seed)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", default="runs/strokes")
    parser.add_argument("--resume", default=None)
    args = parser.parse_args()

    cfg = Config(epochs=args.epochs, seed=args.seed)
    seed_everything(cfg.seed)
    trainer = Trainer(cfg, args.device)
    if args.resume:
        trainer.load(args.resume)
    os.makedirs(args.out, exist_ok=True)
    total = cfg.epochs * trainer.steps_per_epoch()
    while trainer.step < total:
        stats = trainer.train_step()
        if trainer.batch_in_epoch == trainer.steps_per_epoch():
            metrics = trainer.evaluate()
            print(f"epoch {stats['epoch']}: train loss {stats['loss']:.4f} lr {stats['lr']:.4f} "
                  f"val loss {metrics['loss']:.4f} acc {metrics['accuracy']:.3f}")
            trainer.save(os.path.join(args.out, "last.pt"))


if __name__ == "__main__":
    main()
