"""What the C++ bridge asks of torch.compile for the check ``torch_compile`` (tc::CompileProbe,
harness/contract/compile_probe.h): a fresh start of the compiler's records before a compiled run's
``setup()``, and what the compiler did since. Internal: not the recipe API (a recipe reads
``RunOptions.compile``).

The records are TorchDynamo's own (torch 2.15): ``torch._dynamo.utils.counters`` (frames compiled,
graphs), ``guard_failures`` (per recompiled code object, the guard that failed, as
``TORCH_LOGS=recompiles`` prints it) and ``graph_break_reasons`` (each break's reason and the user's
frames).
"""
from __future__ import annotations

import os
import sys
from typing import Dict, List, Optional, Tuple

_saved_cache_dir: List[Optional[str]] = []


def _is_python(path: str) -> bool:
    return os.path.basename(path or "").startswith("python")


def begin(cache_dir: str) -> None:
    """Before a compiled run's setup(): forget what earlier runs in this process compiled (their
    cached frames would make this run's first compilation look like a recompilation: the same
    ``forward`` code object, another module object) and start the records afresh; with
    ``cache_dir``, Inductor's on-disk cache there (a cold warm-up; end() puts the old one back)."""
    import torch
    import torch._dynamo
    from torch._dynamo import utils

    torch._dynamo.reset()  # code caches, guard_failures, graph_break_reasons; not the counters
    utils.counters.clear()
    if cache_dir:
        _saved_cache_dir.append(os.environ.get("TORCHINDUCTOR_CACHE_DIR"))
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
    # Inductor compiles in worker processes started with sys.executable: in the torchconform binary
    # that is not a Python (DataLoader workers get the venv's python the same way, interpreter.cpp).
    if not _is_python(sys.executable):
        torch._inductor.config.compile_threads = 1


def end() -> None:
    """The compiled run is over (its PythonRun is being destroyed): forget its compiled code, whose
    guards and caches hold its model (and through it the run, its DataLoader and the workers: kept
    alive past the process's end, they would keep the forkserver and whoever waits on the
    process's output waiting), and use Inductor's previous cache directory again."""
    import gc

    import torch._dynamo

    torch._dynamo.reset()
    gc.collect()
    while _saved_cache_dir:
        old = _saved_cache_dir.pop()
        if old is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = old


def _guard(reason: str) -> str:
    """``'0/0: tensor 'x' size mismatch ...\\nUser stack trace: ...'`` -> the failed guard alone."""
    first = reason.strip().splitlines()[0] if reason.strip() else reason
    head, sep, rest = first.partition(": ")
    if sep and "/" in head and head.replace("/", "").replace("_", "").isalnum():
        first = rest  # the compile id "frame/attempt"
    return first.split("  #")[0].strip()  # the guard's source comment, kept apart by spaces


def _user_frame(stack) -> str:
    """file:line of the innermost frame of the user's code in a graph break's user stack."""
    from torchconform._bridge import _library_roots

    roots = _library_roots()
    frames = list(stack or [])
    user = [f for f in frames if not os.path.abspath(f.filename).startswith(roots)]
    f = (user or frames)[-1] if (user or frames) else None
    return f"{f.filename}:{f.lineno}" if f is not None else ""


def stats() -> Tuple[int, int, List[Tuple[str, str]], List[Tuple[str, str]]]:
    """(frames compiled, distinct graphs, [(function, failed guard)], [(graph break reason, file:line)])
    since begin(); each graph break once."""
    from torch._dynamo import utils

    frames = int(utils.counters["frames"]["ok"])
    graphs = int(utils.counters["stats"]["unique_graphs"])
    recompilations = []
    for code, reasons in list(utils.guard_failures.items()):
        name = getattr(code, "co_name", str(code))
        where = f"{getattr(code, 'co_filename', '?')}:{getattr(code, 'co_firstlineno', 0)}"
        for r in reasons:
            recompilations.append((f"{name} at {where}", _guard(str(r))))
    breaks: Dict[Tuple[str, str], None] = {}
    # Dynamo words a branch on a tensor's value by the bytecode it could not trace.
    for b in list(utils.graph_break_reasons):
        if not getattr(b, "graph_break", True):
            continue
        reason = str(b.reason).strip().splitlines()[0] if str(b.reason).strip() else str(b.reason)
        if reason.startswith("generic_jump"):
            reason = f"data-dependent control flow: a branch on a tensor's value ({reason})"
        breaks.setdefault((reason, _user_frame(b.user_stack)), None)
    return frames, graphs, recompilations, list(breaks)
