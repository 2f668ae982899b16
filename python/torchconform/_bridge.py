"""What the C++ bridge (python/bridge/) asks of Python: loading a recipe class from a spec, the
probes a recipe provides, and an exception told as one cell's evidence. Internal: not the recipe API.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
import traceback
from typing import List, Optional, Tuple

import torchconform
from torchconform.run import PROBES, Run, provides, recipe_description, recipe_name

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
        raise SpecError(f"--python '{spec}' is not FILE.py:CLASS (or FILE.py:CLASS=NAME)")
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
    line = 0
    try:
        import inspect
        line = inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):
        pass  # no source to point at: the file alone names the place
    absolute = f"{path}:{cls_name}" + (f"={name}" if name else "")
    return cls, name or recipe_name(cls), recipe_description(cls), path, line, absolute


def provided_probes(run: Run) -> List[str]:
    """The optional probes `run`'s class overrides (the others are the C++ base's: not provided)."""
    return [p for p in PROBES if provides(run, p)]
