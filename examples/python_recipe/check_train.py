"""torchconform's checks on our training script (train.py), unchanged:

    torchconform run --python check_train.py:TrainRun

`TrainRun` drives train.py's own Trainer (model, optimizer, schedule, data, checkpoint) through
torchconform.Run; nothing of the training is re-implemented here.
"""
import math
from typing import Dict, List, Tuple

import torch
from torch import nn

import torchconform

import train


class TrainRun(torchconform.Run):
    """train.py: StrokeNet (conv-BN) with SGD + warm-up/cosine, random half turns, clipping, mid-epoch resume"""

    does_activation_checkpointing = True  # setup() honours RunOptions.activation_checkpointing

    # --- required ---
    def setup(self, options: torchconform.RunOptions) -> None:
        train.seed_everything(options.seed, options.deterministic)
        cfg = train.Config(seed=options.seed, checkpoint_activations=options.activation_checkpointing)
        self.trainer = train.Trainer(cfg, options.device)

    def train_step(self) -> torchconform.StepRecord:
        s = self.trainer.train_step()
        return torchconform.StepRecord(step=s["step"], epoch=s["epoch"], loss=s["loss"], lr=s["lr"],
                                       training_mode=self.trainer.model.training)

    def evaluate(self) -> torchconform.EvalResult:
        m = self.trainer.evaluate()
        return torchconform.EvalResult(loss=m["loss"], accuracy=m["accuracy"], logits=m["logits"])

    def save_checkpoint(self, path: str) -> None:
        self.trainer.save(path)

    def load_checkpoint(self, path: str) -> None:
        self.trainer.load(path)

    def steps_per_epoch(self) -> int:
        return self.trainer.steps_per_epoch()

    def parameters(self) -> Dict[str, torch.Tensor]:
        return dict(self.trainer.model.named_parameters())

    def buffers(self) -> Dict[str, torch.Tensor]:
        return dict(self.trainer.model.named_buffers())

    def optimizer_state(self) -> Dict[str, torch.Tensor]:
        names = {p: n for n, p in self.trainer.model.named_parameters()}
        out = {}
        for p, state in self.trainer.optimizer.state.items():
            for key, value in state.items():
                if torch.is_tensor(value):
                    out[f"{names[p]}.{key}"] = value
        return out

    # --- probes: more checks judge the script ---
    def example_input(self, batch: int) -> torch.Tensor:
        return self.trainer.val_set.images[:batch].to(self.trainer.device)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        model = self.trainer.model
        was_training = model.training
        model.eval()
        with torch.no_grad():
            out = model(x)
        model.train(was_training)
        return out

    def forward_train(self, x: torch.Tensor) -> torch.Tensor:
        self.trainer.model.train()
        return self.trainer.model(x)

    def last_batch(self) -> Tuple[torch.Tensor, torch.Tensor]:
        return self.trainer.last_inputs, self.trainer.last_targets

    def training_loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return self.trainer.loss_fn(output, target)

    def clip_norm(self) -> float:
        return self.trainer.cfg.max_grad_norm

    def optimizer(self) -> torch.optim.Optimizer:
        return self.trainer.optimizer

    def bare_model(self) -> nn.Module:
        """A fresh StrokeNet on the CPU: what the checkpoint's "model" entry loads into."""
        return train.StrokeNet(self.trainer.cfg)

    def declared_init(self) -> List[torchconform.InitSpec]:
        """What train.init_weights does, parameter by parameter."""
        specs = []
        for prefix, m in self.trainer.model.named_modules():
            if isinstance(m, nn.Conv2d):  # kaiming_normal_, fan_out, ReLU gain
                fan_out = m.out_channels * m.kernel_size[0] * m.kernel_size[1]
                specs.append(torchconform.InitSpec(f"{prefix}.weight", "normal", 0.0, math.sqrt(2.0 / fan_out)))
            elif isinstance(m, nn.BatchNorm2d):
                specs.append(torchconform.InitSpec(f"{prefix}.weight", "constant", 1.0))
                specs.append(torchconform.InitSpec(f"{prefix}.bias", "constant", 0.0))
            elif isinstance(m, nn.Linear):
                specs.append(torchconform.InitSpec(f"{prefix}.weight", "normal", 0.0, train.HEAD_STD))
                specs.append(torchconform.InitSpec(f"{prefix}.bias", "constant", 0.0))
        return specs
