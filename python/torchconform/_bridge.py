"""What the C++ bridge (python/bridge/) asks of Python: loading a recipe class from a spec, the
probes a recipe provides, and an exception told as one cell's evidence. Internal: not the recipe API.
"""
from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import os
import sys
import sysconfig
import traceback
from typing import Dict, List, Optional, Tuple

import torchconform
from torchconform import _forkserver
from torchconform.run import PROBES, Run, provides, recipe_description, recipe_name

# A process that runs recipes' code gets its fork server from a template (_forkserver.py).
_forkserver.install()

class SpecError(ValueError):
    """A `--python` spec that names no recipe: its message is the whole story (no traceback)."""


# Frames of a traceback an exception's evidence names: the innermost few, enough to see where the
# user's code failed and what called it without a whole stack in a report cell.
FRAMES_SHOWN = 3


def _library_roots() -> Tuple[str, ...]:
    """Where code that is not the user's lives: the standard library, site-packages, this package."""
    roots = {os.path.dirname(os.path.abspath(torchconform.__file__))}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            roots.add(os.path.abspath(p))
    roots.update(os.path.abspath(p) for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    return tuple(r + os.sep for r in sorted(roots))


def describe(exc: BaseException, tb=None) -> str:
    """`Type: message`, then the innermost frames of the user's code (file:line in function).

    `tb`: the traceback, where the caller holds it apart from the exception (pybind11 does)."""
    frames = traceback.extract_tb(tb if tb is not None else exc.__traceback__)
    roots = _library_roots()
    user = [f for f in frames if not os.path.abspath(f.filename).startswith(roots)]
    shown = (user or list(frames))[-FRAMES_SHOWN:]
    text = f"{type(exc).__name__}: {exc}"
    return text + "".join(f"\n  at {f.filename}:{f.lineno} in {f.name}" for f in reversed(shown))


def parse_spec(spec: str) -> Tuple[str, str, Optional[str]]:
    """`path/to/file.py:Class` or `path/to/file.py:Class=name` -> (absolute path, class, name or None)."""
    path, sep, rest = spec.rpartition(":")
    if not sep or not path or not rest:
        raise SpecError(f"--python '{spec}' is not FILE.py:CLASS (or FILE.py:CLASS=NAME, or FILE.py: every recipe "
                        f"class it defines)")
    cls, _, name = rest.partition("=")
    if not cls.isidentifier():
        raise SpecError(f"--python '{spec}': '{cls}' is not a class name")
    if "=" in rest and not name:
        raise SpecError(f"--python '{spec}': the name after '=' is empty")
    return os.path.abspath(path), cls, name or None


def _module_for(path: str):
    """The module of `path`, imported once under its file's stem (so that pickling and a sibling's
    `import stem` find the same module), or under a unique name when another file holds the stem."""
    if not os.path.isfile(path):
        raise SpecError(f"--python: no such Python file: {path}")
    directory = os.path.dirname(path)
    if directory not in sys.path:
        sys.path.insert(0, directory)  # the user's file imports its neighbours
    stem = os.path.splitext(os.path.basename(path))[0]
    known = sys.modules.get(stem)
    if known is not None and os.path.abspath(getattr(known, "__file__", "") or "") == path:
        return known
    name = stem if known is None else f"torchconform_user_{abs(hash(path)):x}_{stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load(spec: str) -> Tuple[type, str, str, str, int, str]:
    """The recipe class a spec names: (class, recipe name, description, file, line of the class,
    the spec with its file made absolute)."""
    path, cls_name, name = parse_spec(spec)
    module = _module_for(path)
    cls = getattr(module, cls_name, None)
    if not isinstance(cls, type) or not issubclass(cls, Run):
        what = "is not defined" if cls is None else "is not a subclass of torchconform.Run"
        raise SpecError(f"--python '{spec}': '{cls_name}' in {path} {what}")
    line = class_line(cls)  # 0: no source to point at, the file alone names the place
    _check_declarations(cls, spec, path, line)
    absolute = f"{path}:{cls_name}" + (f"={name}" if name else "")
    return cls, name or recipe_name(cls), recipe_description(cls), path, line, absolute


def _check_declarations(cls: type, spec: str, path: str, line: int) -> None:
    """The class attributes the runner reads (torchconform.Run's), each of the type it needs: a
    mistake is named with the class, the attribute and the type expected, not as a C++ cast."""
    where = f"--python '{spec}': {cls.__qualname__} ({path}:{line})"

    def strings(value) -> bool:
        return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)

    caught = getattr(cls, "must_be_caught_by", ())
    if isinstance(caught, str):
        raise SpecError(f"{where}: must_be_caught_by is the str {caught!r}: a tuple or list of check names is "
                        f"expected, e.g. ({caught!r},) (a one-element tuple needs its comma)")
    if not strings(caught):
        raise SpecError(f"{where}: must_be_caught_by is {type(caught).__name__} {caught!r}: a tuple or list of "
                        f"check names (str) is expected")
    breaks = getattr(cls, "breaks", {})
    if not isinstance(breaks, dict) or not all(isinstance(k, str) and strings(v) and not isinstance(v, str)
                                               for k, v in breaks.items()):
        raise SpecError(f"{where}: breaks is {type(breaks).__name__} {breaks!r}: a dict of check name -> tuple "
                        f"or list of promise ids (str) is expected, e.g. {{'eval_mode': ('eval_bitwise',)}}")
    needs = getattr(cls, "needs", None)
    if needs is not None and not isinstance(needs, str):
        raise SpecError(f"{where}: needs is {type(needs).__name__} {needs!r}: None or a str ('cuda') is expected")
    control = getattr(cls, "control", False)
    if not isinstance(control, bool):
        raise SpecError(f"{where}: control is {type(control).__name__} {control!r}: a bool is expected")
    amp_dtypes = getattr(cls, "amp_dtypes", ())
    if isinstance(amp_dtypes, str) or not strings(amp_dtypes) or not set(amp_dtypes) <= {"bf16", "fp16"}:
        raise SpecError(f"{where}: amp_dtypes is {type(amp_dtypes).__name__} {amp_dtypes!r}: a tuple of 'bf16' "
                        f"and/or 'fp16' is expected, e.g. ('bf16', 'fp16')")
    for attr in ("name", "description"):
        value = cls.__dict__.get(attr)
        if value is not None and not isinstance(value, str):
            raise SpecError(f"{where}: {attr} is {type(value).__name__} {value!r}: a str is expected")


def expand(spec: str) -> List[str]:
    """The specs a `--python` argument stands for: itself (`FILE.py:Class[=name]`), or, for a bare
    `FILE.py`, `FILE.py:Class` for every subclass of torchconform.Run the file defines (not those it
    imports, not `_private` ones), in the order of the file."""
    if ":" in spec or not spec.endswith(".py"):
        parse_spec(spec)  # a malformed spec: its SpecError
        return [spec]
    path = os.path.abspath(spec)
    module = _module_for(path)
    classes = [c for c in vars(module).values()
               if isinstance(c, type) and issubclass(c, Run) and c is not Run and c.__module__ == module.__name__
               and not c.__name__.startswith("_")]
    if not classes:
        raise SpecError(f"--python '{spec}': {path} defines no subclass of torchconform.Run")

    return [f"{path}:{c.__name__}" for c in sorted(classes, key=class_line)]


def class_line(cls: type) -> int:
    """The line of a class's definition in its file (its first decorator's), as
    ``inspect.getsourcelines(cls)[1]`` gives it, or 0 without a source. One parse of each file:
    inspect (CPython 3.11) parses the whole file again for every class it is asked about, and a
    `--python` file's classes were asked about twice each in every process that loads them (0.7 s of
    CPU for reference.py and variants.py's 43 classes, measured); this is asked of the same parse."""
    try:
        path = inspect.getsourcefile(cls)
        if path:
            line = _class_lines(path, os.stat(path).st_mtime_ns).get(cls.__qualname__)
            if line:
                return line
        return inspect.getsourcelines(cls)[1]  # not a plain class statement of the file: inspect's way
    except (OSError, TypeError, SyntaxError, ValueError):
        return 0


@functools.lru_cache(maxsize=64)
def _class_lines(path: str, mtime_ns: int) -> Dict[str, int]:
    """Each class statement of a file by qualified name (as ``__qualname__`` spells it), and its line
    (the first decorator's, where it has some), from one parse."""
    with open(path, "rb") as f:
        tree = ast.parse(f.read(), path)
    lines: Dict[str, int] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                name = prefix + child.name
                lines.setdefault(name, child.decorator_list[0].lineno if child.decorator_list else child.lineno)
                walk(child, name + ".")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                walk(child, prefix + child.name + ".<locals>.")
            else:
                walk(child, prefix)

    walk(tree, "")
    return lines


def provided_probes(run: Run) -> List[str]:
    """The optional probes `run`'s class overrides (the others are the C++ base's: not provided).
    "optimizer" is always listed: an attribute set in setup() may provide it (see the_optimizer)."""
    return [p for p in PROBES if provides(run, p) or p == "optimizer"]


def the_optimizer(run: Run):
    """The recipe's optimizer: its ``optimizer`` attribute when that is a torch.optim.Optimizer (as
    most training code names it, ``self.optimizer = torch.optim.SGD(...)``), else what its
    ``optimizer()`` override returns; NotImplementedError (not provided) without either."""
    import torch

    attr = getattr(run, "optimizer", None)
    if isinstance(attr, torch.optim.Optimizer):
        return attr
    if provides(run, "optimizer") and callable(attr):
        opt = attr()
        if not isinstance(opt, torch.optim.Optimizer):
            raise TypeError(f"optimizer() returned {type(opt).__name__}, not a torch.optim.Optimizer")
        return opt
    raise NotImplementedError("optimizer")


# The update rules torchconform's checks know, by PyTorch's class name (step_hygiene's rounding
# bounds, amp's adaptive-optimizer rule); a subclass of one answers its base's name.
KNOWN_OPTIMIZERS = ("SGD", "AdamW", "Adam", "RMSprop", "Adagrad", "LBFGS")


def optimizer_algorithm(run: Run) -> str:
    """The update rule of the recipe's optimizer: the first torch.optim class in its MRO that is known."""
    optimizer = the_optimizer(run)
    for cls in type(optimizer).__mro__:
        if cls.__name__ in KNOWN_OPTIMIZERS and cls.__module__.startswith("torch.optim"):
            return cls.__name__
    return type(optimizer).__qualname__


def optimizer_groups(run: Run) -> List[Tuple[list, float]]:
    """Each param group's live tensors and learning rate (a tensor lr read as a float)."""
    return [(list(g["params"]), float(g["lr"])) for g in the_optimizer(run).param_groups]


def optimizer_step(run: Run) -> None:
    """One update from the gradients the parameters hold now."""
    the_optimizer(run).step()


def load_into_bare_model(run: Run, path: str) -> Tuple[str, object, str]:
    """Loads the model state of the checkpoint at ``path`` strictly into ``run.bare_model()``:
    ("loaded", named parameters, ""), ("refused", None, why) when the state does not load strictly
    (a pickled module object that weights_only refuses, no model state, other keys or shapes), or
    ("unknown_format", None, why) when torch.load cannot read the file at all (a format of the
    recipe's own)."""
    import pickle

    import torch

    model = run.bare_model()
    try:
        state = run.model_state_of(path)
    except pickle.UnpicklingError as e:  # weights_only=True refuses what is not plain state
        first = str(e).strip().splitlines()
        return "refused", None, "torch.load(weights_only=True) refuses the file: " + (
            next((l for l in first if "Unsupported global" in l or "GLOBAL" in l), first[0] if first else ""))
    except torchconform.ModelStateNotFound as e:
        return "refused", None, str(e.args[0] if e.args else e)
    except RuntimeError as e:  # not a torch.save archive (PytorchStreamReader, invalid load key)
        return "unknown_format", None, f"torch.load cannot read it: {str(e).strip().splitlines()[0]}"
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        lines = [l.strip() for l in str(e).strip().splitlines() if l.strip()]
        return "refused", None, "load_state_dict(strict=True): " + " ".join(lines)[:400]
    with torch.no_grad():
        return "loaded", dict(model.named_parameters()), ""


def scaler_state(run: Run) -> Optional[Tuple[float, float, float, int, int]]:
    """``run.scaler_state()`` as (scale, growth_factor, backoff_factor, growth_interval,
    growth_tracker), None without an enabled scaler; a dict without those keys is named."""
    state = run.scaler_state()
    if state is None:
        return None
    if not isinstance(state, dict):
        raise TypeError(f"{type(run).__qualname__}.scaler_state() returned {type(state).__name__}: a GradScaler's "
                        f"state_dict() (a dict) or None is expected")
    missing = [k for k in ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")
               if k not in state]
    if missing:
        raise TypeError(f"{type(run).__qualname__}.scaler_state() returned a dict without {', '.join(missing)}: "
                        f"a torch.amp.GradScaler's state_dict() is expected")
    return (float(state["scale"]), float(state["growth_factor"]), float(state["backoff_factor"]),
            int(state["growth_interval"]), int(state["_growth_tracker"]))
