"""Which checks will judge a Python recipe, and why the others will skip it, told from its class
before anything runs (``torchconform list --python FILE``): what the class overrides and declares,
in the terms of :class:`torchconform.Run`.

It reads the same things the checks read when they decide to skip a cell (the probes the class
overrides, ``does_activation_checkpointing``, ``amp_dtypes``, ``data_parallel_modes``), and says
"judged if ..." where only running tells (what ``setup()`` leaves in ``self.optimizer``, whether it
honours ``RunOptions.compile``). The run decides; ``python/tests/test_wheel.py`` holds this outlook
to the verdicts of a run of every check on examples/python_recipe.
"""
from typing import Callable, Dict, List, Tuple

from torchconform.run import Run

# (judged, why): judged "yes", "no" or "if" (then `why` is the condition).
Outlook = Tuple[str, str]


def _missing(cls: type, probes: Tuple[str, ...]) -> List[str]:
    return [p for p in probes if getattr(cls, p, None) is getattr(Run, p)]


def _needs(*probes: str) -> Callable[[type, str], Outlook]:
    def rule(cls: type, device: str) -> Outlook:
        missing = _missing(cls, probes)
        if missing:
            return "no", f"{cls.__name__} does not override {', '.join(m + '()' for m in missing)}"
        return "yes", ""
    return rule


_OPTIMIZER = ("setup() leaves a torch.optim.Optimizer in self.optimizer (or the class overrides "
              "optimizer())")


def _optimizer(cls: type) -> bool:
    return getattr(cls, "optimizer", None) is not getattr(Run, "optimizer")


def _registration(cls: type, device: str) -> Outlook:
    out = _needs("example_input", "predict")(cls, device)
    if out[0] == "no" or _optimizer(cls):
        return out
    return "if", _OPTIMIZER


def _step_hygiene(cls: type, device: str) -> Outlook:
    out = _needs("clip_norm")(cls, device)
    if out[0] == "no" or _optimizer(cls):
        return out
    return "if", _OPTIMIZER


def _grad_checkpointing(cls: type, device: str) -> Outlook:
    if not getattr(cls, "does_activation_checkpointing", False):
        return "no", (f"{cls.__name__}.does_activation_checkpointing is not true (its model has no checkpointed "
                      "segment to compare with plain backprop)")
    return _needs("example_input", "forward_train")(cls, device)


def _data_saturation(cls: type, device: str) -> Outlook:
    probes = ("data_loader",) + (("forward_train", "training_loss") if device == "cuda" else ())
    return _needs(*probes)(cls, device)


def _amp(cls: type, device: str) -> Outlook:
    out = _needs("clip_norm")(cls, device)
    if out[0] == "no":
        return out
    dtypes = tuple(getattr(cls, "amp_dtypes", ()) or ())
    lacking = [d for d in ("bf16", "fp16") if d not in dtypes]
    if lacking:
        listed = (f"lists neither {lacking[0]!r} nor {lacking[1]!r}" if len(lacking) == 2
                  else f"does not list {lacking[0]!r}")
        return "no", f"{cls.__name__}.amp_dtypes {listed} (its mixed precision cannot be switched on from outside)"
    return "yes", ""


def _modes(cls: type) -> Tuple[str, ...]:
    return tuple(getattr(cls, "data_parallel_modes", ()) or ())


def _fsdp(cls: type, device: str) -> Outlook:
    if "fsdp" not in _modes(cls):
        return "no", f"{cls.__name__}.data_parallel_modes does not list \"fsdp\" (its setup() would not train that way)"
    return "yes", ""


def _distributed(cls: type, device: str) -> Outlook:
    if "ddp" not in _modes(cls) and _missing(cls, ("make_distributed",)):
        return "no", (f"{cls.__name__} neither lists \"ddp\" in data_parallel_modes nor overrides make_distributed() "
                      "(its setup() would not train with DistributedDataParallel)")
    return "yes", ""


def _torch_compile(cls: type, device: str) -> Outlook:
    return "if", "setup() applies torch.compile when RunOptions.compile is set"


def _always(cls: type, device: str) -> Outlook:
    return "yes", ""


RULES: Dict[str, Callable[[type, str], Outlook]] = {
    "sanity": _always,
    "reproducibility": _always,
    "resume_equality": _always,
    "eval_mode": _always,
    "autograd_inplace": _always,
    "shapes": _needs("example_input", "predict"),
    "device_agnostic": _needs("example_input", "predict"),
    "init": _needs("declared_init"),
    "registration": _registration,
    "step_hygiene": _step_hygiene,
    "grad_checkpointing": _grad_checkpointing,
    "checkpoint_safety": _needs("bare_model"),
    "data_saturation": _data_saturation,
    "amp": _amp,
    "torch_compile": _torch_compile,
    "fsdp": _fsdp,
    "distributed": _distributed,
}


def outlook(cls: type, checks: List[str], device: str) -> List[Tuple[str, str, str]]:
    """(check, judged, why) for each of `checks` on `device`; a check this module has no rule for
    is "if" with the reason that nothing is known of it before it runs."""
    out = []
    for check in checks:
        rule = RULES.get(check)
        judged, why = rule(cls, device) if rule else ("if", "no outlook is known for this check: the run decides")
        out.append((check, judged, why))
    return out
