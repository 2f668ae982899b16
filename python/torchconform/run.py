"""The recipe API in Python: :class:`Run` and the records it exchanges with the checks.

Each name mirrors harness/contract/run.h field for field (snake_case as there); the C++ bridge
(python/bridge/) converts between the two. Where this page and run.h disagree, run.h is right and
this page is fixed.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

import torch

NamedTensors = Mapping[str, torch.Tensor]
"""Name -> live tensor, in a stable order (a dict keeps its insertion order)."""


@dataclasses.dataclass(frozen=True)
class AmpOptions:
    """Mixed precision asked of :meth:`Run.setup` (``tc::AmpOptions``): the checks ``amp`` and
    ``resume_equality`` (its fp16 pass) set it, for a recipe that lists the dtype in
    :attr:`Run.amp_dtypes`; the others leave it off. How the recipe trains in it is what is checked:
    ``torch.autocast`` around the forward and the loss, a ``torch.amp.GradScaler`` for fp16 (none is
    needed for bf16), the gradients unscaled before clipping."""

    dtype: str = "fp32"
    """``"fp32"``: off (full precision); ``"bf16"`` or ``"fp16"``: autocast to that dtype."""
    init_scale: float = 65536.0
    """The GradScaler's options for fp16 (PyTorch's defaults)."""
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = 2000
    loss_weight: float = 1.0
    """Multiply the loss by this before backward, as a loss averaged over many tokens is small: the
    check uses it to make gradients as small as a large model's (1.0: leave the loss as it is)."""

    @property
    def enabled(self) -> bool:
        return self.dtype != "fp32"

    @property
    def torch_dtype(self) -> torch.dtype:
        return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[self.dtype]

    def grad_scaler(self, device_type: str) -> "torch.amp.GradScaler":
        """A GradScaler with these options, enabled for fp16 only (disabled, it does nothing)."""
        return torch.amp.GradScaler(device_type, init_scale=self.init_scale, growth_factor=self.growth_factor,
                                    backoff_factor=self.backoff_factor, growth_interval=self.growth_interval,
                                    enabled=self.dtype == "fp16")


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
    compile: bool = False
    """Train the way the recipe ships compiled: ``torch.compile`` applied to what the step runs (the
    check ``torch_compile`` sets it; the others leave it False). With ``deterministic`` too, compiled
    code should draw random numbers as eager does (``torch._inductor.config.fallback_random = True``),
    or its dropout masks differ from eager's by design and the comparison with eager means nothing."""
    data_parallel: str = ""
    """Train data-parallel over torchrun's ranks (the check ``fsdp`` sets it; the others leave it ""):
    ``"fsdp"`` the way the recipe shards (``fully_shard``), ``"ddp"`` replicated
    (``DistributedDataParallel``), each rank on its share of every batch. The process group exists
    when setup() runs (``torch.distributed``'s default group). A recipe that cannot train both ways
    raises NotImplementedError for the mode it lacks."""
    amp: AmpOptions = AmpOptions()
    """Mixed precision (the checks ``amp`` and ``resume_equality`` set it; see :class:`AmpOptions`)."""


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
    samples: Optional[List[int]] = None
    """The dataset indices of this step's batch on this rank (a dataset that returns each item's index
    gives them): the check ``distributed`` counts with them that every epoch sees each sample once
    across the ranks, in a new order. None: not counted."""


@dataclasses.dataclass
class EvalResult:
    """What :meth:`Run.evaluate` measured on held-out data (``tc::EvalResult``), for any task: a
    classifier gives its accuracy and logits, a regression or a sequence model its loss and outputs
    (``accuracy`` left None)."""

    loss: float = 0.0
    accuracy: Optional[float] = None
    """A classifier's accuracy; None for a task without one."""
    logits: Optional[torch.Tensor] = None
    """The model's outputs on every evaluated sample, in order: (N, classes) for a classifier,
    (N, ...) for any other task (``outputs`` is the same field under a task-neutral name)."""
    outputs: Optional[torch.Tensor] = None
    """The same as ``logits`` (give one of the two)."""


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


def default_init(model: "torch.nn.Module") -> List[InitSpec]:
    """PyTorch's default initialisation of ``model``, described for :meth:`Run.declared_init`.

    For a model that keeps the defaults of ``torch.nn``: Linear and Conv1d/2d/3d weights and biases
    uniform in +-1/sqrt(fan_in) (fan_in = in_features, or in_channels / groups x the kernel's size:
    ``kaiming_uniform_(a=sqrt(5))``), BatchNorm, LayerNorm, GroupNorm and InstanceNorm weight 1 and
    bias 0, Embedding N(0, 1). Any other module with parameters of its own raises
    ``NotImplementedError`` naming it: declare its initialisation by hand. The same description as
    the C++ ``tc::ref::libtorch_default_init``.
    """
    import math

    nn = torch.nn
    linear_or_conv = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)
    norms = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.LayerNorm, nn.GroupNorm,
             nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d)
    specs: List[InitSpec] = []
    for name, module in model.named_modules():
        own = list(module.named_parameters(recurse=False))
        if not own:
            continue
        prefix = f"{name}." if name else ""
        if isinstance(module, linear_or_conv):
            weight = module.weight
            bound = 1.0 / math.sqrt(weight[0].numel())  # in / groups x the kernel's size
            specs += [InitSpec(prefix + n, "uniform", -bound, bound) for n, _ in own]
        elif isinstance(module, norms):
            specs += [InitSpec(prefix + n, "constant", 1.0 if n == "weight" else 0.0) for n, _ in own]
        elif isinstance(module, nn.Embedding):
            specs += [InitSpec(prefix + n, "normal", 0.0, 1.0) for n, _ in own]
        else:
            raise NotImplementedError(
                f"PyTorch's default initialisation of {name or 'the model'!r} ({type(module).__name__}) is not "
                f"described by torchconform.default_init(): declare its initialisation in declared_init()")
    return specs


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
    data_parallel_modes: Tuple[str, ...] = ()
    """The values of ``RunOptions.data_parallel`` :meth:`setup` honours (``"fsdp"``, ``"ddp"``): the
    check ``fsdp`` needs "fsdp" here (its cells skip otherwise) and compares with "ddp" when present."""
    does_activation_checkpointing: bool = False
    """Whether :meth:`setup` honours ``RunOptions.activation_checkpointing`` (recomputes activations
    in backward when asked): the check ``grad_checkpointing`` skips a recipe that does not."""
    amp_dtypes: Tuple[str, ...] = ()
    """The mixed-precision dtypes :meth:`setup` honours in ``RunOptions.amp`` (``"bf16"``,
    ``"fp16"``): the check ``amp`` needs them (its cells skip otherwise), and its train step calls
    :meth:`after_backward`."""
    control: bool = False
    """A suite's own correct recipe (``->Control()``): a control that must pass, shown apart from the
    recipes under test. Users' recipes leave it False (they are subjects under test)."""

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

    # --- mixed precision (amp_dtypes) ----------------------------------------------------------
    def after_backward(self, parameters: Optional[NamedTensors] = None) -> None:
        """Call it in the train step right after ``backward()``, before ``unscale_``, clipping or the
        optimizer's step: the check ``amp`` reads the raw (scaled) gradients there and may change
        them in place (it injects an inf to see the scaler skip the step). ``parameters``: the
        parameters the step updates (default :meth:`parameters`). Does nothing unless a check asks."""
        hook = getattr(self, "_tc_after_backward", None)
        if hook is not None:
            hook(self.parameters() if parameters is None else parameters)

    def scaler_state(self) -> Optional[Dict[str, object]]:
        """The GradScaler's ``state_dict()`` after the last step, None when the recipe trains
        without an enabled one. An attribute ``self.scaler`` holding a ``torch.amp.GradScaler``
        provides it: no override is needed then."""
        scaler = getattr(self, "scaler", None)
        if isinstance(scaler, torch.amp.GradScaler) and scaler.is_enabled():
            return scaler.state_dict()
        return None

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

    def optimizer(self) -> torch.optim.Optimizer:
        """The optimizer the train step uses (the live object: a check reads its ``param_groups``
        and may call its ``step()`` on a fresh run loaded from a checkpoint). An attribute
        ``self.optimizer`` holding a ``torch.optim.Optimizer`` (set in :meth:`setup`) provides it
        as well: no override is needed then."""
        raise NotImplementedError("optimizer")

    def bare_model(self) -> torch.nn.Module:
        """A freshly built, unwrapped model on the CPU (no DDP, FSDP or ``torch.compile`` around
        it): what a checkpoint's model state must load into with ``load_state_dict(strict=True)``.
        The checkpoint is read with ``torch.load(path, weights_only=True)``; its model state is the
        whole object when that is a state dict, else the entry ``model_state_dict``, ``model``,
        ``state_dict`` or ``model_state``. Override :meth:`model_state_of` for another layout."""
        raise NotImplementedError("bare_model")

    def data_loader(self, epoch: int = 0, batches: Optional[int] = None, workers: Optional[int] = None,
                    prefetch: Optional[int] = None,
                    transform: Optional[Callable[[torch.Tensor], torch.Tensor]] = None) -> Iterable:
        """A new loader over the training data of epoch ``epoch`` as :meth:`train_step` reads it
        (data_saturation measures and samples it): the recipe's own DataLoader (dataset, sampler,
        worker count, prefetch, seeding, start method), except

        - ``batches``: yield this many batches in one pass, the epoch's batches in order and again
          from the first as needed (``sampler=RepeatedBatches(your_sampler, batches)``); None: one epoch;
        - ``workers`` / ``prefetch``: ``num_workers`` / ``prefetch_factor`` where given; None: the
          recipe's own choice for a device that leaves the host's cores to the loader (a GPU; the
          check simulates one on the CPU), which may differ from its choice when training on the CPU;
        - ``transform``: applied to each batch's inputs right after they are read and before the
          recipe's own augmentation, where the batch is made (in the workers when there are any).

        Yields (inputs, targets). The run itself is not advanced."""
        raise NotImplementedError("data_loader")

    def amp_step_on(self, forward: Callable[[torch.Tensor], torch.Tensor], parameters: NamedTensors,
                    inputs: torch.Tensor, targets: torch.Tensor) -> Callable[[], float]:
        """The recipe's mixed-precision step (the one ``RunOptions.amp`` asked for: autocast region,
        scaler, clipping, optimizer) applied to another model, so that amp can time the procedure on
        a compute-bound workload (a transformer block): ``forward(x)`` gives its logits (B, classes),
        ``parameters`` are its live parameters (fp32, on the device), the loss is cross-entropy
        against ``targets``. Return a function that trains the workload one step and returns the
        loss as a float. Called after :meth:`setup` on a run made for it alone: this run may keep the
        workload's optimizer and scaler in its own attributes. Without it, the speed is recorded as
        not measured."""
        raise NotImplementedError("amp_step_on")

    def make_distributed(self) -> "Run":
        """The recipe's data-parallel training as the check ``distributed`` drives it under torchrun:
        a new, not set-up Run (of this class or another) whose :meth:`setup` honours
        ``RunOptions.data_parallel == "ddp"`` (it declares "ddp" in ``data_parallel_modes``): the
        seeds' DDP code, ``DistributedSampler`` with ``set_epoch``, rank-0 writes and a barrier after
        them. Without an override, a recipe that declares "ddp" is its own: a new instance of its
        class. The check reads its :meth:`last_batch`, :meth:`training_loss` and :meth:`bare_model`
        (one process's gradients on the whole batch), the gradients :meth:`after_backward` sees
        (else the ``.grad`` after the step) and ``StepRecord.samples``."""
        raise NotImplementedError("make_distributed")

    def dataset_size(self) -> int:
        """How many samples an epoch of training covers (the check ``distributed``); without it, the
        length of :meth:`data_loader`'s dataset."""
        raise NotImplementedError("dataset_size")

    def model_state_of(self, path: str) -> Dict[str, torch.Tensor]:
        """The model's state dict as the checkpoint at ``path`` holds it (see :meth:`bare_model`)."""
        return find_model_state(torch.load(path, map_location="cpu", weights_only=True), path)


PROBES: Tuple[str, ...] = ("example_input", "predict", "forward_train", "last_batch", "training_loss",
                           "clip_norm", "declared_init", "optimizer", "bare_model", "data_loader", "amp_step_on",
                           "make_distributed", "dataset_size")
"""The optional probes above: the bridge calls a subclass's only where it overrides it."""


MODEL_STATE_KEYS: Tuple[str, ...] = ("model_state_dict", "model", "state_dict", "model_state")
"""Where :meth:`Run.model_state_of` looks for the model state in a checkpoint that is a dict."""


class ModelStateNotFound(KeyError):
    """The checkpoint holds no state dict of a model where :meth:`Run.model_state_of` looks."""


def _is_state_dict(obj: object) -> bool:
    return isinstance(obj, dict) and bool(obj) and all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items())


def find_model_state(obj: object, path: str = "the checkpoint") -> Dict[str, torch.Tensor]:
    """The model state in a loaded checkpoint: ``obj`` itself when it is a state dict (names to
    tensors), else its first entry in :data:`MODEL_STATE_KEYS` that is one."""
    if _is_state_dict(obj):
        return obj  # type: ignore[return-value]
    if isinstance(obj, dict):
        for key in MODEL_STATE_KEYS:
            if _is_state_dict(obj.get(key)):
                return obj[key]
        for key in MODEL_STATE_KEYS:
            if isinstance(obj.get(key), torch.nn.Module):
                raise ModelStateNotFound(f"{path}'s entry '{key}' is a pickled {type(obj[key]).__name__} object, not "
                                         f"its state_dict(): it loads only where that class still exists unchanged")
        raise ModelStateNotFound(f"{path} has no model state dict (looked for the whole file and the entries "
                                 f"{', '.join(MODEL_STATE_KEYS)}; it has {', '.join(map(str, list(obj)[:8]))})")
    if isinstance(obj, torch.nn.Module):
        raise ModelStateNotFound(f"{path} is a pickled {type(obj).__name__} object, not its state_dict(): it loads "
                                 f"only where that class still exists unchanged")
    raise ModelStateNotFound(f"{path} holds a {type(obj).__name__}, not a state dict")


class RepeatedBatches(torch.utils.data.Sampler):
    """``sampler``'s items in order, again from the first as often as needed, ``count`` in all, in
    one pass (for :meth:`Run.data_loader`'s ``batches``): re-iterating ``sampler`` each round."""

    def __init__(self, sampler: Iterable, count: int) -> None:
        self.sampler, self.count = sampler, int(count)

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator:
        given = 0
        while given < self.count:
            before = given
            for item in self.sampler:
                if given == self.count:
                    return
                yield item
                given += 1
            if given == before:
                raise ValueError("RepeatedBatches: the sampler yields nothing")


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


__all__ = ["AmpOptions", "EvalResult", "InitSpec", "MODEL_STATE_KEYS", "ModelStateNotFound", "NamedTensors", "PROBES", "RepeatedBatches", "Run",
           "RunOptions", "StepRecord", "find_model_state", "provides", "recipe_description", "recipe_name"]

