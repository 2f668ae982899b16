"""The recipe API in Python: :class:`Run` and the records it exchanges with the checks.

Each name mirrors harness/contract/run.h field for field (snake_case as there); the C++ bridge
(python/bridge/) converts between the two. Where this page and run.h disagree, run.h is right and
this page is fixed.
"""
from __future__ import annotations

import dataclasses
from typing import List, Mapping, Optional, Tuple

import torch

NamedTensors = Mapping[str, torch.Tensor]
"""Name -> live tensor, in a stable order (a dict keeps its insertion order)."""


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """What a check asks of a fresh run (``tc::RunOptions``)."""

    device: str = "cpu"
    """The device to train on, as ``torch.device`` reads it: ``"cpu"``, ``"cuda"``, ``"cuda:0"``."""
    seed: int = 0
    """Seed everything with it: Python's ``random``, NumPy, torch, the data loader's generator."""
    deterministic: bool = True
    """Use deterministic algorithms (the checks of bitwise equality need it)."""
    quick: bool = False
    """Shorter runs are wanted (fewer steps; the recipe may ignore it)."""
    activation_checkpointing: bool = False
    """Recompute activations in backward (gradient checkpointing)."""


@dataclasses.dataclass
class StepRecord:
    """What one :meth:`Run.train_step` did (``tc::StepRecord``)."""

    step: int = 0
    """The global step index, from 0."""
    epoch: int = 0
    loss: float = 0.0
    """The loss of this step's forward, before the update (a Python float, ``loss.item()``)."""
    lr: float = 0.0
    """The learning rate this step used."""
    training_mode: bool = False
    """``model.training`` during the step."""


@dataclasses.dataclass
class EvalResult:
    """What :meth:`Run.evaluate` measured on held-out data (``tc::EvalResult``)."""

    loss: float = 0.0
    accuracy: float = 0.0
    logits: Optional[torch.Tensor] = None
    """(N, classes): every evaluated sample, in order."""


@dataclasses.dataclass(frozen=True)
class InitSpec:
    """How a parameter is declared to be initialised (``tc::InitSpec``; the ``init`` check reads it).

    ``kind`` is one of ``"normal"``, ``"uniform"``, ``"constant"``, ``"truncated_normal"``.
    ``a`` is the mean (normal, truncated normal), the low bound (uniform) or the value (constant);
    ``b`` the standard deviation (normal, truncated normal) or the high bound (uniform); ``low`` and
    ``high`` are a truncated normal's absolute cutoffs (``torch.nn.init.trunc_normal_``'s a and b).
    """

    parameter: str
    kind: str = "constant"
    a: float = 0.0
    b: float = 0.0
    low: float = 0.0
    high: float = 0.0


class Run:
    """One complete way to train, driven by torchconform's checks (``tc::Run``).

    Subclass it around the training loop you ship and implement the required methods; the optional
    probes raise :class:`NotImplementedError` here, and a check that needs a probe the recipe does
    not provide skips its cell with the reason, exactly as for a C++ recipe.

    Attributes a subclass may set:

    ``name``: the recipe's name in the matrix (default: the class name in snake_case; the
    ``--python file.py:Class=name`` form overrides both). ``description``: one line for
    ``torchconform list`` (default: the first line of the class's docstring).
    """

    name: Optional[str] = None
    description: Optional[str] = None
    must_be_caught_by: Tuple[str, ...] = ()
    """A deliberately broken variant: the checks that must catch it (``->MustBeCaughtBy``); empty for
    correct code. Its cells there are ``ok`` only when caught."""
    breaks: Mapping[str, Tuple[str, ...]] = {}
    """Per targeted check, the promises it breaks by construction (``->Breaks``): caught only by one
    of them."""
    needs: Optional[str] = None
    """``"cuda"`` when the broken practice can only show where a CUDA device exists (``->Needs``)."""

    # --- required ------------------------------------------------------------------------------
    def setup(self, options: RunOptions) -> None:
        """Fresh state: seed with ``options.seed``, build model, optimizer, scheduler and data."""
        raise NotImplementedError("setup")

    def train_step(self) -> StepRecord:
        """One optimisation step; a new epoch starts when the previous one is exhausted."""
        raise NotImplementedError("train_step")

    def evaluate(self) -> EvalResult:
        """Evaluate on held-out data (``model.eval()`` and ``torch.no_grad()``)."""
        raise NotImplementedError("evaluate")

    def save_checkpoint(self, path: str) -> None:
        """Write everything needed to resume exactly to ``path``."""
        raise NotImplementedError("save_checkpoint")

    def load_checkpoint(self, path: str) -> None:
        """Load ``path`` into this freshly set-up run: it then continues the saved run."""
        raise NotImplementedError("load_checkpoint")

    def steps_per_epoch(self) -> int:
        """Optimisation steps in one epoch."""
        raise NotImplementedError("steps_per_epoch")

    def parameters(self) -> NamedTensors:
        """The model's live parameters by name (``dict(model.named_parameters())``), not copies."""
        raise NotImplementedError("parameters")

    def buffers(self) -> NamedTensors:
        """The model's live buffers by name (``dict(model.named_buffers())``)."""
        raise NotImplementedError("buffers")

    def optimizer_state(self) -> NamedTensors:
        """The optimizer's state tensors by a stable name (e.g. ``"fc.weight.momentum_buffer"``)."""
        raise NotImplementedError("optimizer_state")

    # --- optional probes (the checks skip a cell whose probe is missing) -----------------------
    def example_input(self, batch: int) -> torch.Tensor:
        """A batch of model inputs on the run's device, e.g. (batch, 3, S, S)."""
        raise NotImplementedError("example_input")

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """The model's output for ``x`` in eval mode without autograd; the mode is left as it was."""
        raise NotImplementedError("predict")

    def forward_train(self, x: torch.Tensor) -> torch.Tensor:
        """The model's output for ``x`` in train mode with autograd (gradient and memory probes)."""
        raise NotImplementedError("forward_train")

    def last_batch(self) -> Tuple[torch.Tensor, torch.Tensor]:
        """The last train step's (inputs, targets) as its forward received them, on the device.

        The inputs are a copy taken before the forward, so nothing the step did to them afterwards
        shows. With :meth:`forward_train` and :meth:`training_loss` a check recomputes that
        step's gradient.
        """
        raise NotImplementedError("last_batch")

    def training_loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The loss :meth:`train_step` backpropagates for ``output`` and ``target``, afresh."""
        raise NotImplementedError("training_loss")

    def clip_norm(self) -> float:
        """The gradient-norm bound the train step clips to (0: none)."""
        raise NotImplementedError("clip_norm")

    def declared_init(self) -> List[InitSpec]:
        """How each parameter is initialised."""
        raise NotImplementedError("declared_init")


PROBES: Tuple[str, ...] = ("example_input", "predict", "forward_train", "last_batch", "training_loss",
                           "clip_norm", "declared_init")
"""The optional probes above: the bridge calls a subclass's only where it overrides it."""


def provides(run: Run, probe: str) -> bool:
    """Whether ``run``'s class overrides the optional probe ``probe`` (what the bridge asks)."""
    return getattr(type(run), probe, None) is not getattr(Run, probe)


def recipe_name(cls: type) -> str:
    """The class's recipe name: its ``name`` attribute, else its name in snake_case (MyRun -> my_run)."""
    if getattr(cls, "name", None):
        return str(cls.name)
    out: List[str] = []
    for i, ch in enumerate(cls.__name__):
        if ch.isupper() and i > 0 and not cls.__name__[i - 1].isupper():
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


def recipe_description(cls: type) -> str:
    """One line for ``torchconform list``: the ``description`` attribute, else the docstring's first line."""
    if getattr(cls, "description", None):
        return str(cls.description)
    doc = cls.__doc__ if cls.__doc__ is not Run.__doc__ else None
    return (doc or "").strip().splitlines()[0] if (doc or "").strip() else "a Python recipe"


__all__ = ["EvalResult", "InitSpec", "NamedTensors", "PROBES", "Run", "RunOptions", "StepRecord",
           "provides", "recipe_description", "recipe_name"]

