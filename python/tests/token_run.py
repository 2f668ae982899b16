"""A token-sequence recipe, written apart from the reference: a small causal language model
(embedding, one Transformer encoder layer with a causal mask, a tied output head) on int64 token
batches (B, T) given as a dict ``{"ids": ..., "mask": ...}``, AdamW with a linear warm-up, random
token masking in the DataLoader's workers (seeded per sample from the run's seed, the epoch and the
index), no accuracy: ``EvalResult(loss=cross_entropy, outputs=logits (N, T, vocab))``. Every check
that applies must pass it (python/tests/test_written_apart.py)::

    torchconform run --device cpu --python python/tests/token_run.py:TokenRun
"""
from __future__ import annotations

import copy
import hashlib
import io
import os
import tempfile
from typing import Dict, List, Optional

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

import torchconform

VOCAB, WIDTH, SEQ, SEQS, EVAL_SEQS, BATCH, MASK_ID = 61, 32, 12, 96, 32, 8, 0
LR, CLIP, WARMUP = 2e-3, 1.0, 4


def digest(state: Dict[str, object]) -> str:
    """sha256 of the state's serialisation (torch.save checks no bytes of the tensors)."""
    buf = io.BytesIO()
    torch.save(state, buf)
    return hashlib.sha256(buf.getvalue()).hexdigest()


def sequences(n: int, seed: int) -> torch.Tensor:
    """(n, SEQ + 1) token ids 1..VOCAB-1: arithmetic runs with a per-sequence stride, some noise."""
    g = torch.Generator().manual_seed(seed)
    start = torch.randint(1, VOCAB, (n, 1), generator=g)
    stride = torch.randint(1, 4, (n, 1), generator=g)
    ids = (start + stride * torch.arange(SEQ + 1)) % (VOCAB - 1) + 1
    noise = torch.rand(n, SEQ + 1, generator=g) < 0.05
    return torch.where(noise, torch.randint(1, VOCAB, (n, SEQ + 1), generator=g), ids)


class Sequences(Dataset):
    def __init__(self, data: torch.Tensor) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int):
        return i, self.data[i, :-1], self.data[i, 1:]


class MaskedBatch:
    """The batch (made where the loader makes it, in a worker): the ids stacked, a probe's transform
    applied, then in sample i of epoch e 10% of the tokens replaced by MASK_ID, drawn from a generator
    seeded with (seed, epoch, i): the same on any worker and after a resume."""

    def __init__(self, seed: int, epoch: int, transform=None) -> None:
        self.seed, self.epoch, self.transform = seed, epoch, transform

    def __call__(self, samples):
        index = [s[0] for s in samples]
        ids, target = torch.stack([s[1] for s in samples]), torch.stack([s[2] for s in samples])
        if self.transform is not None:
            ids = self.transform(ids)
        keep = torch.stack([torch.rand(ids.shape[1:], generator=torch.Generator().manual_seed(
            hash((self.seed, self.epoch, i)) % 2**62)) >= 0.1 for i in index])
        return {"ids": torch.where(keep, ids, torch.full_like(ids, MASK_ID)), "mask": keep}, target


class TinyLm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.pos = nn.Parameter(torch.zeros(SEQ, WIDTH))
        self.block = nn.TransformerEncoderLayer(WIDTH, nhead=4, dim_feedforward=64, dropout=0.1, batch_first=True)
        nn.init.normal_(self.embed.weight, std=0.02)
        nn.init.normal_(self.pos, std=0.02)

    def forward(self, batch) -> torch.Tensor:
        ids = batch["ids"] if isinstance(batch, dict) else batch
        h = self.embed(ids) + self.pos[: ids.size(1)]
        causal = nn.Transformer.generate_square_subsequent_mask(ids.size(1), device=ids.device)
        h = self.block(h, src_mask=causal, is_causal=True)
        return h @ self.embed.weight.t()  # (B, T, VOCAB), tied head


class TokenRun(torchconform.Run):
    """a causal language model on token batches, AdamW with warm-up (written apart from the reference)"""

    name = "token_run"

    def setup(self, options: torchconform.RunOptions) -> None:
        self.options = options
        self.device = torch.device(options.device)
        torch.manual_seed(options.seed)
        torch.use_deterministic_algorithms(options.deterministic)
        self.train_data, self.eval_data = sequences(SEQS, 21), sequences(EVAL_SEQS, 22)
        self.model = TinyLm().to(self.device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=LR, weight_decay=0.01)
        self.schedule = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: min(1.0, (s + 1) / WARMUP))
        self.epoch, self.position, self.global_step = 0, 0, 0
        self.batches: Optional[List] = None
        self._last = None

    def _loader(self, epoch: int, workers: int = 0, transform=None, batches: Optional[int] = None) -> DataLoader:
        g = torch.Generator().manual_seed(self.options.seed * 7919 + epoch)
        data = Sequences(self.train_data)
        sampler = torch.utils.data.BatchSampler(torch.utils.data.RandomSampler(data, generator=g), BATCH, drop_last=True)
        if batches is not None:
            sampler = torchconform.RepeatedBatches(sampler, batches)
        # Its own generator: without one, each iterator draws its base seed from torch's global RNG,
        # which moves the dropout masks of the steps after it (a resume mid-epoch then diverges).
        return DataLoader(data, batch_sampler=sampler, num_workers=workers, generator=torch.Generator().manual_seed(epoch),
                          collate_fn=MaskedBatch(self.options.seed, epoch, transform))

    def _to(self, batch):
        (inputs, target) = batch
        return {k: v.to(self.device) for k, v in inputs.items()}, target.to(self.device)

    def train_step(self) -> torchconform.StepRecord:
        if self.batches is None:
            self.batches = list(self._loader(self.epoch))
        if self.position >= len(self.batches):
            self.epoch, self.position = self.epoch + 1, 0
            self.batches = list(self._loader(self.epoch))
        inputs, target = self._to(self.batches[self.position])
        self.model.train()
        lr = self.optimizer.param_groups[0]["lr"]
        self._last = (inputs["ids"].clone(), target)
        loss = self.training_loss(self.model(inputs), target)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), CLIP)
        self.optimizer.step()
        self.schedule.step()
        record = torchconform.StepRecord(step=self.global_step, epoch=self.epoch, loss=loss.item(), lr=lr,
                                         training_mode=self.model.training)
        self.position += 1
        self.global_step += 1
        return record

    @torch.no_grad()
    def evaluate(self) -> torchconform.EvalResult:
        self.model.eval()
        ids = self.eval_data.to(self.device)
        out = self.model(ids[:, :-1])
        return torchconform.EvalResult(loss=self.training_loss(out, ids[:, 1:]).item(), outputs=out)

    def state(self) -> Dict[str, object]:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "schedule": self.schedule.state_dict(), "epoch": self.epoch, "position": self.position,
                "step": self.global_step, "torch_rng": torch.get_rng_state()}

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
        self.epoch, self.position, self.global_step = int(s["epoch"]), int(s["position"]), int(s["step"])
        torch.set_rng_state(s["torch_rng"])
        self.batches = None

    def steps_per_epoch(self) -> int:
        return SEQS // BATCH

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
        return self.eval_data[:batch, :-1].to(self.device)

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
        return nn.functional.cross_entropy(output.reshape(-1, VOCAB), target.reshape(-1))

    def clip_norm(self) -> float:
        return CLIP

    def bare_model(self) -> nn.Module:
        with torch.random.fork_rng(devices=[]):
            return TinyLm()

    def data_loader(self, epoch=0, batches=None, workers=None, prefetch=None, transform=None):
        loader = self._loader(epoch, workers=2 if workers is None else workers, transform=transform, batches=batches)
        if prefetch and loader.num_workers:
            loader = DataLoader(loader.dataset, batch_sampler=loader.batch_sampler, num_workers=loader.num_workers,
                                prefetch_factor=prefetch, generator=loader.generator, collate_fn=loader.collate_fn)
        return loader
