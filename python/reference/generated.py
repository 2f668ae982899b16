"""Python recipes nobody wrote (issue 44): the Python twin of suites/generated/generated_run.cpp.

A seed names a draw: each dimension's choice comes from the same splitmix64 sequence of the seed, in
the same dimension order and over the same choice lists as the C++ generator, so ``pygen_17`` makes
the choices ``gen-17`` makes. Every draw derives from :class:`reference.PythonReference` and
overrides its hooks only; every combination is correct by construction. A mutation operator applies
one real mistake to any draw and declares the check and the promises that must catch it (the C++
operators' names and ids); where it changes nothing a run can observe on a draw it is left out there,
with the reason.

The classes are made when a name asks for them (a module-level ``__getattr__``, PEP 562): the
loader's ``getattr(module, "pygen_17")`` builds the draw, ``pygen_17__drop_zero_grad`` the mutant.

    torchconform run --device cpu --python python/reference/generated.py:pygen_17 --recipe pygen_17
    torchconform run --device cpu --check step_hygiene \\
        --python python/reference/generated.py:pygen_17__drop_zero_grad --recipe pygen_17__drop_zero_grad
    python3 python/reference/generated.py describe 17          # the choices, the mutants, the equivalent ones
    python3 python/reference/generated.py specs 1..8 '@eval_mode'  # --python arguments for a sweep

The dimensions (each as the C++ generator's, in Python's terms):

- optimizer: SGD (momentum 0.9, lr 0.05, weight decay 5e-4), SGD with Nesterov, Adam (lr 2e-3),
  AdamW (lr 2e-3, weight decay 0.01), RMSprop (lr 1e-3, no momentum);
- schedule: ``StepLR(3, 0.8)`` per update (the reference's), ``ConstantLR(factor=1.0)``, a warm-up
  + cosine ``LambdaLR`` (3 warm-up steps, 4 epochs, floor 0.1), ``StepLR(1, 0.5)`` stepped once an
  epoch (at the end of the epoch's last step);
- batching: 16 with drop_last (the reference's), 20 with the last batch of 16 kept, 8 with drop_last;
- accumulation: 1, 2 or 3 micro-batches a step (sizes as even as the batch allows, the larger first),
  each micro-batch's mean loss weighed by its share of the batch and backpropagated on its own;
- model: the reference's classifier, the same with its BatchNorm kept in eval mode while training
  (``train()`` overridden, the usual fine-tuning idiom), an MLP (Flatten, Linear, ReLU, Linear;
  PyTorch's default initialisation, declared with ``torchconform.default_init``);
- freezing: none, the first layer's parameters with ``requires_grad=False`` (still in the optimizer);
- ema: none, an EMA of the parameters (decay 0.9) evaluated in place of them and checkpointed, an EMA
  kept (updated and checkpointed, read by nothing);
- checkpoint: the reference's (``model_state_dict`` entry), the model under the entry ``state_dict``,
  the model's keys at the top level of the checkpoint dict (with ``model_state_of`` to read them);
- loss: cross-entropy, cross-entropy with ``label_smoothing=0.1`` (the step's and ``training_loss``);
- decay: weight decay on every parameter, none on 1-D parameters (biases, norms) in a second group;
- augmentation: on the loader's workers (the reference's, seeded per batch), a random horizontal flip
  drawn from the global generator on the training thread, none.
"""
from __future__ import annotations

import os
import re
import sys
from typing import Callable, Dict, List, Optional, Sequence, Tuple

# --- the draws and the operators: plain Python, no torch (`describe` runs on any python3) -------
DIMENSIONS: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("optimizer", ("sgd", "sgd_nesterov", "adam", "adamw", "rmsprop")),
    ("schedule", ("step_lr", "constant", "warmup_cosine", "step_lr_per_epoch")),
    ("batching", ("16_drop_last", "20_uneven_last", "8_drop_last")),
    ("accumulation", ("1", "2", "3")),
    ("model", ("classifier", "classifier_frozen_bn", "mlp")),
    ("freezing", ("none", "first_layer")),
    ("ema", ("none", "evaluated", "kept")),
    ("checkpoint", ("archive", "state_dict_entry", "flat_keys")),
    ("loss", ("cross_entropy", "label_smoothing")),
    ("decay", ("all", "no_decay_1d")),
    ("augmentation", ("workers", "flip_on_device", "none")),
)
U64 = (1 << 64) - 1
PREFIX = "pygen_"


def _splitmix64(state: int) -> Tuple[int, int]:
    """(the new state, the next value): generated_run.cpp's splitmix64."""
    state = (state + 0x9E3779B97F4A7C15) & U64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & U64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & U64
    return state, z ^ (z >> 31)


class Draw:
    """The choices a seed names, one per dimension (``tc::generated::draw``)."""

    def __init__(self, seed: int) -> None:
        if not 0 <= seed <= U64:
            raise ValueError(f"a seed is 0..2**64-1, not {seed}")
        self.seed = seed
        self.choices: Dict[str, str] = {}
        state = seed
        for name, choices in DIMENSIONS:
            state, value = _splitmix64(state)
            self.choices[name] = choices[value % len(choices)]

    def __getitem__(self, dim: str) -> str:
        return self.choices[dim]

    def is_(self, dim: str, choice: str) -> bool:
        return self.choices[dim] == choice

    def describe(self) -> str:
        """``optimizer=adam schedule=constant ...``: the C++ ``Draw::describe()``'s words."""
        return " ".join(f"{k}={v}" for k, v in self.choices.items())


class Operator:
    """A mistake applied to a draw: its mechanism, the check and the promises one of which breaks,
    and where it is equivalent (the reason, or "" where it makes a mutant)."""

    def __init__(self, name: str, mechanism: str, check: str, promises: Sequence[str],
                 equivalent_on: Callable[[Draw], str] = lambda d: "") -> None:
        self.name, self.mechanism, self.check = name, mechanism, check
        self.promises = tuple(promises)
        self.equivalent_on = equivalent_on


def _no_rng_equivalent(d: Draw) -> str:
    # Python keeps the sampler's generator in the sampler's state (not beside the RNGs, as the C++
    # reference does): what the left-out RNG states still decide is dropout (the classifiers) and the
    # flip on the training thread. The MLP has no dropout; the workers' augmentation draws from the
    # batch's own seed, and the loader's generator only picks the workers' base seed, which nothing
    # reads. So with the MLP and no flip on the training thread nothing reads a lost RNG state.
    if d.is_("model", "mlp") and not d.is_("augmentation", "flip_on_device"):
        return ("the MLP has no dropout and nothing on the training thread draws a random number: the RNG "
                "states left out are read by nothing (the sampler's generator is in the sampler's state)")
    return ""


def _no_scheduler_equivalent(d: Draw) -> str:
    if d.is_("schedule", "constant"):
        return "a constant rate: the schedule's state (a step count) sets no rate"
    if d.is_("schedule", "step_lr_per_epoch"):
        # torch's StepLR is chainable: each step multiplies the rate the optimizer holds (restored
        # with the optimizer's state) when last_epoch % step_size == 0; with step_size 1 that is
        # every step, whatever the count: a count restarted at 0 halves the rate at the same steps.
        return ("StepLR(step_size=1) is chainable: it halves the optimizer's (restored) rate at every epoch "
                "end whatever its count, so a count restarted at 0 sets the same rates")
    return ""


OPERATORS: Tuple[Operator, ...] = (
    Operator("drop_zero_grad", "optimizer.zero_grad() left out: each step adds its gradient to the last one's",
             "step_hygiene", ("fresh_gradients",)),
    Operator("zero_grad_in_micro_loop",
             "zero_grad() at the top of the micro-batch loop: only the last micro-batch's gradient is stepped",
             "step_hygiene", ("fresh_gradients", "batch_gradient"),
             lambda d: "one micro-batch per step: nothing to clear between" if d.is_("accumulation", "1") else ""),
    Operator("undivided_accumulation",
             "each micro-batch's mean loss backpropagated undivided (not weighed by its share)",
             "step_hygiene", ("batch_gradient",),
             lambda d: "one micro-batch per step: its share is the whole batch" if d.is_("accumulation", "1") else ""),
    Operator("clip_after_step", "clip_grad_norm_ after optimizer.step(): the step used the unclipped gradient",
             "step_hygiene", ("clip_between_backward_and_step",)),
    Operator("clip_subset",
             "clip_grad_norm_ given the head's parameters only (the last layer): the layers before it step with their "
             "gradient unclipped", "step_hygiene", ("clip_between_backward_and_step",),
             lambda d: ("the MLP with its first layer frozen: the head is every parameter that takes a gradient"
                        if d.is_("model", "mlp") and d.is_("freezing", "first_layer") else "")),
    Operator("rebuild_optimizer_each_epoch",
             "the optimizer and its schedule built inside the epoch loop: every epoch after the first starts from a "
             "fresh optimizer (momentum, moments lost) and a schedule started over",
             "step_hygiene", ("optimizer_built_once",)),
    Operator("skip_set_epoch",
             "sampler.set_epoch(epoch) called for the first epoch only: every epoch repeats the first's order (and "
             "the augmentation seeds the sampler draws with it)",
             "data_saturation", ("epoch_order", "worker_augmentations")),
    Operator("no_optimizer_state", "the optimizer's state_dict (momentum, moments, rates) left out of the checkpoint",
             "resume_equality", ("resume_bitwise",)),
    Operator("no_scheduler_state", "the scheduler's state_dict left out of the checkpoint", "resume_equality",
             ("resume_bitwise",), _no_scheduler_equivalent),
    Operator("no_rng_state", "the generators' states (torch's, Python's, the loader's) left out of the checkpoint",
             "resume_equality", ("resume_bitwise",), _no_rng_equivalent),
    Operator("no_sampler_state", "the sampler's position and epoch order left out of the checkpoint",
             "resume_equality", ("resume_bitwise",)),
    Operator("no_ema_state", "the EMA of the weights left out of the checkpoint", "resume_equality",
             ("resume_bitwise", "resume_evaluation"),
             lambda d: ("no EMA" if d.is_("ema", "none") else
                        "the EMA is kept but nothing reads it (not evaluated, not a parameter or buffer)"
                        if d.is_("ema", "kept") else "")),
    Operator("no_scaler_state",
             "the GradScaler's state_dict (scale, growth tracker) left out of the checkpoint: with fp16 the resumed run "
             "starts over at the initial scale", "resume_equality", ("resume_bitwise_amp",)),
    Operator("lenient_load",
             "the checkpoint loaded into the model wrapped for data parallelism with strict=False: no key matches "
             "('module.' prefixed), nothing loads and nothing says so; the resume goes on from the fresh initialisation",
             "resume_equality", ("resume_bitwise",)),
    Operator("eval_without_eval", "evaluation without model.eval(): dropout drops and BatchNorm updates its statistics",
             "eval_mode", ("eval_bitwise", "bn_stats_untouched"),
             lambda d: ("the MLP has no dropout or BatchNorm: train() and eval() compute alike"
                        if d.is_("model", "mlp") else "")),
    Operator("eval_without_no_grad", "evaluation without torch.no_grad(): it builds an autograd graph", "eval_mode",
             ("no_autograd_graph",)),
    Operator("no_train_after_eval",
             "the epoch starts without model.train(): training goes on in eval mode after an evaluation",
             "eval_mode", ("train_mode_restored",)),
    Operator("non_atomic_save", "torch.save straight over the previous checkpoint (no temporary file and rename)",
             "checkpoint_safety", ("atomic_save",)),
    Operator("prefixed_save", "the model saved through a wrapper (DDP's way): every key prefixed with 'module.'",
             "checkpoint_safety", ("strict_bare_load",)),
    Operator("no_seed", "set_seed() left out: nothing is seeded", "reproducibility",
             ("same_seed_bitwise", "other_process_bitwise")),
    Operator("unseeded_augmentation",
             "the workers' augmentation draws from a seed nobody set (os.urandom, as std::random_device)",
             "reproducibility", ("same_seed_bitwise", "other_process_bitwise"),
             lambda d: "" if d.is_("augmentation", "workers") else
             "no augmentation on the loader's workers: nothing reads their seed"),
)
OPERATORS_BY_NAME: Dict[str, Operator] = {op.name: op for op in OPERATORS}


def applicable(d: Draw) -> List[Operator]:
    """The operators that make a mutant of ``d`` (not equivalent there)."""
    return [op for op in OPERATORS if not op.equivalent_on(d)]


def name_of(seed: int, op: Optional[Operator] = None) -> str:
    return f"{PREFIX}{seed}" + (f"__{op.name}" if op else "")


_NAME = re.compile(rf"^{PREFIX}(\d{{1,20}})(?:__([a-z0-9_]+))?$")


def parse_name(name: str) -> Optional[Tuple[Draw, Optional[Operator]]]:
    """``pygen_17`` -> (draw 17, None); ``pygen_17__drop_zero_grad`` -> (draw 17, the operator). None
    for a name not of that form; ValueError for an unknown operator or one equivalent on the draw."""
    m = _NAME.match(name)
    if not m:
        return None
    d = Draw(int(m.group(1)))
    if m.group(2) is None:
        return d, None
    op = OPERATORS_BY_NAME.get(m.group(2))
    if op is None:
        raise ValueError(f"'{name}': no mutation operator '{m.group(2)}' (operators: {', '.join(OPERATORS_BY_NAME)})")
    why = op.equivalent_on(d)
    if why:
        raise ValueError(f"'{name}' is equivalent to its draw by construction ({why}): "
                         f"`python3 {__file__} describe {d.seed}` names the mutants that apply")
    return d, op


def describe_text(seed: int) -> str:
    d = Draw(seed)
    lines = [f"{name_of(seed)}: {d.describe()}", "mutants:"]
    for op in OPERATORS:
        why = op.equivalent_on(d)
        if not why:
            lines.append(f"  {name_of(seed, op)}  ->  {op.check}: {', '.join(op.promises)}")
    lines.append("equivalent here, left out:")
    for op in OPERATORS:
        why = op.equivalent_on(d)
        if why:
            lines.append(f"  {op.name}: {why}")
    return "\n".join(lines)


def _seeds(span: str) -> List[int]:
    first, _, last = span.partition("..")
    lo, hi = int(first), int(last or first)
    if hi < lo or hi - lo >= 100000:
        raise SystemExit(f"'{span}': a range is A..B with A <= B, at most 100000 draws")
    return list(range(lo, hi + 1))


def _main(argv: List[str]) -> int:
    usage = ("usage: generated.py describe SEED[..SEED]\n"
             "       generated.py specs SEED[..SEED] [draws|*|@CHECK|OPERATOR]   (one --python spec a line)")
    if len(argv) < 2 or argv[0] not in ("describe", "specs"):
        print(usage, file=sys.stderr)
        return 2
    seeds = _seeds(argv[1])
    if argv[0] == "describe":
        print("\n\n".join(describe_text(s) for s in seeds))
        return 0
    which = argv[2] if len(argv) > 2 else "draws"
    path = os.path.abspath(__file__)
    for s in seeds:
        d = Draw(s)
        if which == "draws":
            print(f"{path}:{name_of(s)}")
            continue
        for op in applicable(d):
            if which == "*" or which == "@" + op.check or which == op.name:
                print(f"{path}:{name_of(s, op)}")
    return 0


if __name__ == "__main__":  # the tables alone: no torch needed to describe a draw
    sys.exit(_main(sys.argv[1:]))

# --- the recipes ---------------------------------------------------------------------------------
import contextlib  # noqa: E402
import math  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import torchconform  # noqa: E402
from reference import (CHANNELS, CLASSES, CLIP_NORM, DROPOUT, IMAGE_SIZE, INTEGRITY_KEY, LR, LR_GAMMA,  # noqa: E402
                       LR_STEP_SIZE, MOMENTUM, TRAIN_SIZE, WEIGHT_DECAY, AugmentedBatches, ImageClassifier, PythonReference,
                       SeededBatchSampler, augment, init_weights, state_digest)

EMA_DECAY = 0.9
LABEL_SMOOTHING = 0.1


class FrozenBnClassifier(ImageClassifier):
    """The reference's classifier with its BatchNorm kept in eval mode while training (fine-tuning's
    idiom): ``train()`` puts the BatchNorm layers back in eval mode, a fresh model included."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.train()

    def train(self, mode: bool = True) -> "FrozenBnClassifier":
        super().train(mode)
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.eval()
        return self


class PlainBatches(AugmentedBatches):
    """The training set without augmentation on the workers (the draws augmenting on the training
    thread, or not at all)."""

    def augment(self, images: torch.Tensor, seed: int) -> torch.Tensor:
        return images


class UnseededAugmentedBatches(AugmentedBatches):
    """Mutant ``unseeded_augmentation``: the augmentation's seed from the OS, not the batch's."""

    def augment(self, images: torch.Tensor, seed: int) -> torch.Tensor:
        return augment(images, int.from_bytes(os.urandom(8), "little"))


class BatchSampler(SeededBatchSampler):
    """The reference's sampler with the draw's batch size, the last partial batch kept or dropped."""

    def __init__(self, dataset_size: int, batch_size: int, generator: torch.Generator, drop_last: bool) -> None:
        super().__init__(dataset_size, batch_size, generator)
        self.drop_last = drop_last

    def __len__(self) -> int:
        if self.drop_last:
            return self.dataset_size // self.batch_size
        return -(-self.dataset_size // self.batch_size)


class WarmupCosine:
    """``LambdaLR``'s factor: linear warm-up over ``warmup`` steps, then a cosine down to ``floor``
    at ``total`` steps (reference/schedule.cpp's WarmupCosine::factor). A callable object, so that
    ``LambdaLR.state_dict()`` saves its numbers."""

    def __init__(self, warmup: int, total: int, floor: float) -> None:
        self.warmup, self.total, self.floor = warmup, total, floor

    def __call__(self, t: int) -> float:
        if t < self.warmup:
            return (t + 1) / self.warmup
        progress = min(1.0, (t - self.warmup) / (self.total - self.warmup))
        return self.floor + (1.0 - self.floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


class Wrapper(nn.Module):
    """A module holding the model under the name ``module``, as DDP does (mutant ``prefixed_save``)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.module = model


def even_split(batch: int, parts: int) -> List[int]:
    """``ReferenceRun::even_split``: ``parts`` sizes adding up to ``batch``, the larger first."""
    return [batch // parts + (1 if i < batch % parts else 0) for i in range(parts)]


# The checkpoint's entries other than the model's (the layout flat_keys tells the model's keys by these).
STATE_ENTRIES = ("epoch", "step", "model_state_dict", "state_dict", "optimizer_state_dict", "scheduler_state_dict",
                 "scaler_state_dict", "rng", "sampler", "ema", INTEGRITY_KEY)
LEFT_OUT = {"no_optimizer_state": "optimizer_state_dict", "no_scheduler_state": "scheduler_state_dict",
            "no_rng_state": "rng", "no_ema_state": "ema", "no_scaler_state": "scaler_state_dict"}


class _Generated(PythonReference):
    """A draw of the generator, with at most one mistake (``mutation``) applied. Made by :func:`make`."""

    draw: Draw = Draw(0)
    mutation: str = ""
    data_parallel_modes = ()  # the draws train on one process (the reference's DDP code is not theirs)
    make_distributed = torchconform.Run.make_distributed  # not provided: `distributed` skips, saying so

    # ---- the draw's choices ----
    def _is(self, dim: str, choice: str) -> bool:
        return self.draw.is_(dim, choice)

    def _batch(self) -> Tuple[int, bool]:
        if self._is("batching", "20_uneven_last"):
            return 20, False  # 96 = 4 x 20 + 16
        if self._is("batching", "8_drop_last"):
            return 8, True
        return 16, True

    # ---- tc::Run ----
    def setup(self, options: torchconform.RunOptions) -> None:
        super().setup(options)
        self.scheduler = self.make_scheduler()
        with torch.no_grad():
            self.ema = [p.detach().clone() for p in self.model.parameters()] if not self._is("ema", "none") else []

    def train_step(self) -> torchconform.StepRecord:
        """The reference's step with micro-batches: the epoch, the batch, the micro-batch loop, the
        schedule (per update, or at the end of the epoch's last step), the EMA."""
        record, images, labels = self.next_batch()
        x = self.augment_on_device(images.to(self.device, non_blocking=True))  # (B, 3, S, S)
        y = labels.to(self.device, non_blocking=True)                          # (B,)
        self._last_batch = (x.clone(), y)
        record.loss = self.accumulated_step(x, y)
        if not self._is("schedule", "step_lr_per_epoch") or self.position >= self.steps_per_epoch():
            self.scheduler.step()
        self.step += 1
        return record

    def evaluate(self) -> torchconform.EvalResult:
        no_grad = contextlib.nullcontext() if self.mutation == "eval_without_no_grad" else torch.no_grad()
        with no_grad:
            if self.mutation != "eval_without_eval":
                self.model.eval()
            if not self._is("ema", "evaluated"):
                return self.eval_loop()
            live = list(self.model.parameters())
            with torch.no_grad():
                kept = [p.detach().clone() for p in live]
                for p, e in zip(live, self.ema):
                    p.copy_(e)
            try:
                return self.eval_loop()
            finally:
                with torch.no_grad():
                    for p, k in zip(live, kept):
                        p.copy_(k)

    def steps_per_epoch(self) -> int:
        batch, drop_last = self._batch()
        return TRAIN_SIZE // batch if drop_last else -(-TRAIN_SIZE // batch)

    # ---- the reference's hooks ----
    def seed_everything(self) -> None:
        if self.mutation != "no_seed":
            super().seed_everything()

    def make_model(self) -> nn.Module:
        if self._is("model", "mlp"):
            s = IMAGE_SIZE
            model = nn.Sequential(nn.Flatten(), nn.Linear(3 * s * s, 32), nn.ReLU(), nn.Linear(32, CLASSES))
        else:
            cls = FrozenBnClassifier if self._is("model", "classifier_frozen_bn") else ImageClassifier
            model = cls(CLASSES, IMAGE_SIZE, DROPOUT, CHANNELS)
            model.apply(init_weights)
        if self._is("freezing", "first_layer"):
            # The first layer's parameters ("features.0." of the classifier, "1." of the MLP).
            first = next(iter(model.named_parameters()))[0]
            prefix = first[:first.rfind(".") + 1]
            for name, p in model.named_parameters():
                if name.startswith(prefix):
                    p.requires_grad_(False)
        return model

    def micro_batch_sizes(self) -> List[int]:
        """Every micro-batch size an epoch's steps forward (one per batch size and split)."""
        batch, drop_last = self._batch()
        sizes = [batch] * (TRAIN_SIZE // batch) + ([TRAIN_SIZE % batch] if not drop_last and TRAIN_SIZE % batch else [])
        k = int(self.draw["accumulation"])
        return sorted({n for b in sizes for n in even_split(b, min(k, b))})

    def compile_model(self, model: nn.Module) -> nn.Module:
        """The reference's ``torch.compile(model)``, with dynamic shapes where the step forwards
        batches of more than one size (an uneven last batch, micro-batches of unequal sizes): a
        graph specialised to the first size would recompile at the next (torch_compile's
        ``warmup_one_off``, as py_compiled_partial_last_batch shows). The batch dimension alone is
        marked dynamic (:meth:`forward_loss`): ``dynamic=True`` makes every dimension symbolic, and
        duck sizing then ties a micro-batch of 3 to the 3 input channels, which the convolution
        specialises (measured: pygen_5, micro-batches 3, 3, 2, recompiled at 2)."""
        if not self.options.compile:
            return model
        torch._inductor.config.fallback_random = self.options.deterministic
        return torch.compile(model)

    def forward_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.options.compile and len(self.micro_batch_sizes()) > 1:
            torch._dynamo.mark_dynamic(x, 0)
        return self.amp_forward(lambda: self.loss_of(self.train_model(x), y))

    def make_optimizer(self, parameters) -> torch.optim.Optimizer:
        params = list(parameters)
        no_decay_1d = self._is("decay", "no_decay_1d")
        decay = [p for p in params if not (no_decay_1d and p.dim() <= 1)]
        no_decay = [p for p in params if no_decay_1d and p.dim() <= 1]
        opt = self.draw["optimizer"]
        lr = {"adam": 2e-3, "adamw": 2e-3, "rmsprop": 1e-3}.get(opt, LR)
        wd = 0.01 if opt == "adamw" else WEIGHT_DECAY
        groups = ([{"params": decay, "weight_decay": wd}] if decay else []) + \
                 ([{"params": no_decay, "weight_decay": 0.0}] if no_decay else [])
        if opt in ("sgd", "sgd_nesterov"):
            return torch.optim.SGD(groups, lr=lr, momentum=MOMENTUM, nesterov=opt == "sgd_nesterov")
        if opt == "adam":
            return torch.optim.Adam(groups, lr=lr)
        if opt == "adamw":
            return torch.optim.AdamW(groups, lr=lr)
        return torch.optim.RMSprop(groups, lr=lr)

    def make_scheduler(self):
        sched = self.draw["schedule"]
        if sched == "constant":
            return torch.optim.lr_scheduler.ConstantLR(self.optimizer, factor=1.0, total_iters=0)
        if sched == "warmup_cosine":
            return torch.optim.lr_scheduler.LambdaLR(self.optimizer, WarmupCosine(3, 4 * self.steps_per_epoch(), 0.1))
        if sched == "step_lr_per_epoch":
            return torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=1, gamma=0.5)
        return self.scheduler  # the reference's StepLR(3, 0.8), made by setup()

    def _dataset_class(self):
        if self._is("augmentation", "workers"):
            return UnseededAugmentedBatches if self.mutation == "unseeded_augmentation" else AugmentedBatches
        return PlainBatches

    def make_loader(self):
        self.train_set = self._dataset_class()(self.train_set.images, self.train_set.labels)
        self.sampler_generator = torch.Generator().manual_seed(self.options.seed)
        self.loader_generator = torch.Generator().manual_seed(self.options.seed)
        batch, drop_last = self._batch()
        self.sampler = BatchSampler(len(self.train_set), batch, self.sampler_generator, drop_last)
        return self.build_loader(self.train_set, self.sampler, self.loader_generator)

    def data_loader(self, epoch: int = 0, batches: Optional[int] = None, workers: Optional[int] = None,
                    prefetch: Optional[int] = None, transform=None):
        batch, drop_last = self._batch()
        sampler = BatchSampler(len(self.train_set), batch, torch.Generator().manual_seed(self.options.seed), drop_last)
        for e in range(epoch + 1):
            sampler.set_epoch(e)
        dataset = self._dataset_class()(self.train_set.images, self.train_set.labels)
        dataset.transform = transform
        return self.build_loader(dataset, torchconform.RepeatedBatches(sampler, batches) if batches else sampler,
                                 torch.Generator().manual_seed(self.options.seed), workers, prefetch, for_probe=True)

    def begin_epoch(self) -> None:
        if self.mutation == "rebuild_optimizer_each_epoch" and self.epoch > 0:
            # for epoch in ...: optimizer = SGD(model.parameters(), ...); scheduler = StepLR(optimizer, ...)
            self.optimizer = self.make_optimizer(self.model.parameters())
            self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=LR_STEP_SIZE, gamma=LR_GAMMA)
            self.scheduler = self.make_scheduler()
        if self.mutation != "no_train_after_eval":
            self.model.train()
        if self.mutation == "skip_set_epoch" and self.sampler.epoch >= 0:
            # A DistributedSampler without set_epoch: its order is drawn from (seed, epoch 0) again.
            self.sampler.epoch, self.sampler.position = self.epoch, 0
        else:
            self.sampler.set_epoch(self.epoch)

    def augment_on_device(self, x: torch.Tensor) -> torch.Tensor:
        if not self._is("augmentation", "flip_on_device"):
            return x
        flip = torch.rand(x.size(0), device=x.device) < 0.5  # (B,), from the global generator
        return torch.where(flip.view(-1, 1, 1, 1), x.flip(3), x)

    def loss_of(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        smoothing = LABEL_SMOOTHING if self._is("loss", "label_smoothing") else 0.0
        return F.cross_entropy(output, target, label_smoothing=smoothing)

    def accumulated_step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        """zero_grad -> for each micro-batch: forward, loss weighed by its share, backward -> unscale_
        -> clip -> step -> update -> the EMA; the batch's loss (the weighed losses' sum)."""
        op = self.mutation
        if op != "drop_zero_grad":
            self.optimizer.zero_grad(set_to_none=True)
        batch = x.size(0)
        sizes = even_split(batch, min(int(self.draw["accumulation"]), batch))
        reported = None
        for xs, ys in zip(x.split(sizes), y.split(sizes)):
            if op == "zero_grad_in_micro_loop":
                self.optimizer.zero_grad(set_to_none=True)
            loss = self.forward_loss(xs, ys)
            if len(sizes) > 1 and op != "undivided_accumulation":
                loss = loss * (xs.size(0) / batch)
            self.scaler.scale(loss).backward()
            reported = loss.detach() if reported is None else reported + loss.detach()
        self.after_backward(self._step_parameters)
        self.scaler.unscale_(self.optimizer)
        if op == "clip_subset":
            torch.nn.utils.clip_grad_norm_(self.head_parameters(), max_norm=CLIP_NORM)  # the mistake: the head only
        elif op != "clip_after_step":
            torch.nn.utils.clip_grad_norm_(self.step_parameters(), max_norm=CLIP_NORM)
        self.scaler.step(self.optimizer)
        if op == "clip_after_step":
            torch.nn.utils.clip_grad_norm_(self.step_parameters(), max_norm=CLIP_NORM)  # the mistake
        self.scaler.update()
        self.update_ema()
        return reported.item()

    def head_parameters(self) -> List[torch.Tensor]:
        """Mutant ``clip_subset``: the last layer's parameters (the head: those sharing the last named
        parameter's prefix, generated_run.cpp's head_parameters())."""
        named = list(self.model.named_parameters())
        last = named[-1][0]
        head = last[:last.rfind(".") + 1]
        return [p for name, p in named if name.startswith(head)]

    def update_ema(self) -> None:
        if not self.ema:
            return
        with torch.no_grad():
            for e, p in zip(self.ema, self.model.parameters()):
                e.mul_(EMA_DECAY).add_(p.detach(), alpha=1.0 - EMA_DECAY)

    # ---- the checkpoint: the draw's layout ----
    def _model_for_save(self) -> nn.Module:
        return Wrapper(self.model) if self.mutation == "prefixed_save" else self.model

    def checkpoint_state(self) -> Dict[str, object]:
        state = super().checkpoint_state()
        model_state = self._model_for_save().state_dict()
        del state["model_state_dict"]
        if self._is("checkpoint", "archive"):
            state["model_state_dict"] = model_state
        elif self._is("checkpoint", "state_dict_entry"):
            state["state_dict"] = model_state
        else:
            state = {**model_state, **state}  # flat_keys: the model's keys at the top level
        if self.ema:
            state["ema"] = list(self.ema)
        if self.mutation == "no_sampler_state":
            del state["sampler"]
        elif self.mutation in LEFT_OUT and LEFT_OUT[self.mutation] in state:
            del state[LEFT_OUT[self.mutation]]
        return state

    def model_state_in(self, state: Dict[str, object]) -> Dict[str, torch.Tensor]:
        if self._is("checkpoint", "archive"):
            return state["model_state_dict"]
        if self._is("checkpoint", "state_dict_entry"):
            return state["state_dict"]
        return {k: v for k, v in state.items() if k not in STATE_ENTRIES}

    def restore(self, state: Dict[str, object]) -> None:
        state = dict(state)
        model_state = self.model_state_in(state)
        fresh = super().checkpoint_state()  # this run's own, for a part the file lacks (a mutant's)
        if self.mutation == "no_sampler_state":
            fresh["sampler"] = {"position": 0, **self.sampler.state_dict()}
        merged = {**fresh, **{k: v for k, v in state.items() if k in STATE_ENTRIES}}
        if self.mutation == "lenient_load":
            # The mistake: the bare model's checkpoint loaded into the model wrapped as DDP(model)
            # wraps it, with strict=False: every key is looked for under "module.", none is there,
            # nothing loads, and the missing and unexpected keys it returns are read by nobody.
            Wrapper(self.model).load_state_dict(model_state, strict=False)
        else:
            self._model_for_save().load_state_dict(model_state)
        merged["model_state_dict"] = self.model.state_dict()
        super().restore(merged)
        if self.ema and "ema" in state:
            with torch.no_grad():
                for e, saved in zip(self.ema, state["ema"]):
                    e.copy_(saved)
        if self.mutation == "no_sampler_state" and self.epoch >= 0:
            self.begin_epoch()  # the epoch starts over: a new order from the sampler's generator

    def model_state_of(self, path: str) -> Dict[str, torch.Tensor]:
        if not self._is("checkpoint", "flat_keys"):
            return super().model_state_of(path)
        state = torch.load(path, map_location="cpu", weights_only=True)
        return self.model_state_in(state)

    def write_checkpoint(self, state: Dict[str, object], path: str) -> None:
        if self.mutation != "non_atomic_save":
            return super().write_checkpoint(state, path)
        torch.save({**state, INTEGRITY_KEY: state_digest(state)}, path)  # the mistake: in place

    # ---- probes ----
    def training_loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return self.loss_of(output, target)

    def declared_init(self) -> List[torchconform.InitSpec]:
        if self._is("model", "mlp"):
            return torchconform.default_init(self.model)
        return super().declared_init()


_MADE: Dict[str, type] = {}


def make(seed: int, operator: Optional[str] = None) -> type:
    """The recipe class of draw ``seed``, with the mistake ``operator`` applied (a mutant) or none."""
    name = f"{PREFIX}{seed}" + (f"__{operator}" if operator else "")
    if name in _MADE:
        return _MADE[name]
    parsed = parse_name(name)
    if parsed is None:
        raise ValueError(f"'{name}' is not {PREFIX}SEED or {PREFIX}SEED__OPERATOR")
    d, op = parsed
    attrs: Dict[str, object] = {"name": name, "draw": d, "mutation": op.name if op else "", "__module__": __name__,
                                "__qualname__": name,
                                # the MLP has no features to recompute: the draw declares what it honours
                                "does_activation_checkpointing": not d.is_("model", "mlp")}
    if op is None:
        attrs["description"] = (f"generated draw: {d.describe()}. Mutants: "
                                f"{', '.join(o.name for o in applicable(d))}"
                                + (". Equivalent here, left out: " + "; ".join(
                                    f"{o.name} ({o.equivalent_on(d)})" for o in OPERATORS if o.equivalent_on(d))
                                   if len(applicable(d)) < len(OPERATORS) else ""))
        attrs["control"] = True  # correct by construction: a failing cell is the suite's false alarm
    else:
        attrs["description"] = f"mutant of {name_of(seed)}: {op.mechanism}"
        attrs["must_be_caught_by"] = (op.check,)
        attrs["breaks"] = {op.check: op.promises}
        attrs["control"] = False
    cls = type(name, (_Generated,), attrs)
    _MADE[name] = cls
    return cls


def __getattr__(attr: str):
    """PEP 562: ``getattr(module, "pygen_17")`` (the loader's) builds the draw, ``pygen_17__OP`` the
    mutant; any other name is an AttributeError as usual."""
    parsed = parse_name(attr)  # an unknown operator, or one equivalent on the draw: its ValueError says why
    if parsed is None:
        raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")
    d, op = parsed
    return make(d.seed, op.name if op else None)
