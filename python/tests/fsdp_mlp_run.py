"""An FSDP recipe written apart from python/reference/ (the check fsdp's "correct but different" test,
CTest fsdp.mlp_recipe_passes): nothing in common with py_reference but torchconform.Run.

- an MLP whose layers split unevenly over 2 ranks (Linear(12, 7): 7 rows, 4 on one rank and 3 on
  the other; a LayerNorm of 7; Linear(7, 3)), GELU, no dropout, no batch-norm;
- AdamW (its state: two moments per parameter and a 0-dim step count), a linear warm-up;
- data: a fixed synthetic set through torch's own DistributedSampler (shuffle, seed, set_epoch)
  and a DataLoader without workers, batch 10 per rank;
- FSDP2: fully_shard on every Linear, then on the root (the LayerNorm in the root's group);
- the checkpoint: get_state_dict(full_state_dict, cpu_offload) gathered to rank 0, torch.save by
  rank 0 alone (no temporary file: written in place), then a barrier; every rank maps the file
  (torch.load(mmap=True)) and set_state_dict(full_state_dict) keeps its shard.
"""
from typing import Dict

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import torchconform

SAMPLES, FEATURES, HIDDEN, CLASSES, BATCH = 120, 12, 7, 3, 10


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(FEATURES, HIDDEN)
        self.norm = nn.LayerNorm(HIDDEN)
        self.out = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(F.gelu(self.norm(self.inp(x))))


class FsdpMlpRun(torchconform.Run):
    """an MLP with AdamW sharded by FSDP2, checkpointed with torch.distributed.checkpoint's state dicts"""

    data_parallel_modes = ("fsdp", "ddp")

    def setup(self, options: torchconform.RunOptions) -> None:
        self.options = options
        self.device = torch.device(options.device)
        torch.manual_seed(options.seed)
        g = torch.Generator().manual_seed(1000 + options.seed)
        x = torch.randn(SAMPLES, FEATURES, generator=g)
        y = (x[:, :CLASSES] * 2 + 0.3 * torch.randn(SAMPLES, CLASSES, generator=g)).argmax(1)
        data = TensorDataset(x, y)
        rank, world = (dist.get_rank(), dist.get_world_size()) if options.data_parallel else (0, 1)
        self.sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=options.seed,
                                          drop_last=True)
        self.loader = DataLoader(data, batch_size=BATCH, sampler=self.sampler, drop_last=True)
        self.model = Mlp().to(self.device)
        if options.data_parallel == "fsdp":
            for m in self.model.modules():
                if isinstance(m, nn.Linear):
                    fully_shard(m)
            fully_shard(self.model)
            self.step_model = self.model
        elif options.data_parallel == "ddp":
            self.step_model = DistributedDataParallel(self.model)
        else:
            self.step_model = self.model
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=3e-3, weight_decay=0.01)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: min(1.0, (s + 1) / 4))
        self.step, self.epoch, self.position = 0, 0, 0
        self.batches = None

    def train_step(self) -> torchconform.StepRecord:
        if self.batches is None:
            self.sampler.set_epoch(self.epoch)
            self.batches = iter(self.loader)
            for _ in range(self.position):
                next(self.batches)
        x, y = next(self.batches)
        x, y = x.to(self.device), y.to(self.device)
        self.model.train()
        loss = F.cross_entropy(self.step_model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.scheduler.step()
        record = torchconform.StepRecord(step=self.step, epoch=self.epoch, loss=loss.item(),
                                         lr=self.scheduler.get_last_lr()[0], training_mode=True)
        self.step += 1
        self.position += 1
        if self.position == self.steps_per_epoch():
            self.epoch, self.position, self.batches = self.epoch + 1, 0, None
        return record

    def steps_per_epoch(self) -> int:
        return len(self.loader)

    def evaluate(self) -> torchconform.EvalResult:
        raise NotImplementedError("evaluate")

    def parameters(self) -> Dict[str, torch.Tensor]:
        return dict(self.model.named_parameters())

    def _whole(self) -> StateDictOptions:
        return StateDictOptions(full_state_dict=True, cpu_offload=True)

    def save_checkpoint(self, path: str) -> None:
        model_state, optimizer_state = get_state_dict(self.model, self.optimizer, options=self._whole())
        if not self.options.data_parallel or dist.get_rank() == 0:
            torch.save({"model": model_state, "optimizer": optimizer_state, "scheduler": self.scheduler.state_dict(),
                        "progress": [self.step, self.epoch, self.position]}, path)
        if self.options.data_parallel:
            dist.barrier()

    def load_checkpoint(self, path: str) -> None:
        # Every rank maps the file (mmap: tensors are read as they are copied into its shards).
        # (Not broadcast_from_rank0: it pickles through broadcast_object_list, which needs NumPy.)
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        set_state_dict(self.model, self.optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"],
                       options=StateDictOptions(full_state_dict=True))
        self.scheduler.load_state_dict(state["scheduler"])
        self.step, self.epoch, self.position = state["progress"]
        self.batches = None

    def bare_model(self) -> nn.Module:
        return Mlp()

    def model_state_of(self, path: str):
        return torch.load(path, map_location="cpu", weights_only=True)["model"]
