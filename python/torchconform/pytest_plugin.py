"""The pytest plugin (entry point ``pytest11``, loaded wherever the wheel is installed): one test item
per cell, check x recipe x device, judged by the same ``torchconform run`` as the command line.

Two ways to name the recipes::

    pytest --torchconform my_run.py                # every torchconform.Run class my_run.py defines
    pytest --torchconform my_run.py:MyRun=prod     # one class (the spec of `torchconform run --python`)
    pytest tests/test_loop.py                      # a test file naming its Run classes at module level
                                                   # (defined there or imported: `from my_run import MyRun`)

An item passes on ``ok``; fails with the cell's verdict and evidence on ``fail``, ``missed``,
``false_alarm`` or ``error``; and skips with the check's reason on ``skipped``. ``-k``, ``-x`` and
``--junitxml`` work on the items as on any test. The selected items run together, in one
``torchconform run`` started on this interpreter (``python -m torchconform``) when the first of them
runs; its JSON and HTML reports are written as the command line writes them (``--torchconform-json``,
``--torchconform-html``). Importing this plugin imports nothing heavy: torch is imported by the run's
process, not by pytest's.
"""
import json
import os
import re
import subprocess
import sys
from typing import Dict, List, Optional, Tuple

import pytest

_FAILING = ("fail", "missed", "false_alarm", "error")


def pytest_addoption(parser):
    group = parser.getgroup("torchconform", "torchconform: check training loops (torchconform.Run classes)")
    group.addoption("--torchconform", action="append", default=[], metavar="FILE.py[:CLASS[=NAME]]",
                    help="collect one test per check of this file's recipes (every torchconform.Run class it "
                         "defines, or the one named); repeatable")
    group.addoption("--torchconform-device", default="auto", choices=("auto", "cpu", "cuda", "all"),
                    help="the devices whose cells are collected, as `torchconform run --device` (default auto: "
                         "a GPU when there is one, else the CPU)")
    group.addoption("--torchconform-check", action="append", default=[], metavar="CHECK[,CHECK]",
                    help="collect these checks only (default: every check)")
    group.addoption("--torchconform-json", default=os.path.join("reports", "latest.json"), metavar="PATH",
                    help="where the run's JSON report goes (default reports/latest.json)")
    group.addoption("--torchconform-html", default=os.path.join("reports", "latest.html"), metavar="PATH",
                    help="where the run's HTML report goes (default reports/latest.html)")
    group.addoption("--torchconform-seed", default=None, metavar="N", help="the run's seed (`run --seed`)")


def _command(*args: str) -> List[str]:
    return [sys.executable, "-X", "utf8", "-m", "torchconform", *args]


def _split_spec(spec: str) -> Tuple[str, str]:
    """(absolute file, the rest of the spec: ':Class=name' or '')."""
    m = re.match(r"^(.*?\.py)(:.*)?$", spec)
    if not m:
        raise pytest.UsageError(f"--torchconform '{spec}': not FILE.py or FILE.py:CLASS[=NAME]")
    return os.path.realpath(m.group(1)), m.group(2) or ""


class _Catalogue:
    """`torchconform list --json --python SPEC` for the specs collected, once per session."""

    def __init__(self, config):
        self.config = config
        self._listed: Dict[str, dict] = {}

    def recipes_of(self, spec: str) -> Tuple[List[dict], List[str], Dict[str, bool]]:
        if spec not in self._listed:
            proc = subprocess.run(_command("list", "--json", "--python", spec), capture_output=True, text=True,
                                  encoding="utf-8", errors="replace")
            if proc.returncode != 0:
                raise _ListError(spec, proc.stderr.strip() or proc.stdout.strip())
            self._listed[spec] = json.loads(proc.stdout)
        cat = self._listed[spec]
        # The listing loads no Python recipe but the spec's: its Python recipes are the spec's.
        mine = [r for r in cat["recipes"] if r.get("language") == "python"]
        checks = [c["name"] for c in cat["checks"]]
        return mine, checks, cat.get("devices", {})


class _ListError(Exception):
    def __init__(self, spec: str, message: str):
        super().__init__(f"torchconform cannot load '{spec}':\n{message}")


def _devices(option: str, available: Dict[str, bool]) -> List[str]:
    if option == "all":
        return [d for d in ("cpu", "cuda") if available.get(d)]
    if option == "auto":
        return ["cuda" if available.get("cuda") else "cpu"]
    return [option]


def _wanted_checks(config, checks: List[str]) -> List[str]:
    picked = [c for arg in config.getoption("torchconform_check") for c in arg.split(",") if c]
    unknown = [c for c in picked if c not in checks]
    if unknown:
        raise pytest.UsageError(f"--torchconform-check: no check named {', '.join(unknown)} (checks: {', '.join(checks)})")
    return [c for c in checks if not picked or c in picked]


def pytest_configure(config):
    config._torchconform = _Session(config)
    config.addinivalue_line("markers", "torchconform: a torchconform cell (check x recipe x device)")


def pytest_collect_file(file_path, parent):
    specs = [s for s in parent.config.getoption("torchconform") if _split_spec(s)[0] == os.path.realpath(str(file_path))]
    if specs:
        return RecipeFile.from_parent(parent, path=file_path, specs=specs)
    return None


def _is_run_class(obj) -> bool:
    """A subclass of torchconform.Run (not Run itself), told without importing torchconform here."""
    if not isinstance(obj, type):
        return False
    mro = getattr(obj, "__mro__", ())
    return any(b.__module__ == "torchconform.run" and b.__name__ == "Run" for b in mro[1:])


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector, name, obj):
    if not _is_run_class(obj) or not isinstance(collector, pytest.Module):
        return None
    import inspect

    try:
        file = inspect.getsourcefile(obj)
    except TypeError:
        return None
    if not file:
        return None
    file = os.path.realpath(file)
    if any(_split_spec(s)[0] == file for s in collector.config.getoption("torchconform")):
        return []  # named with --torchconform: collected once, by RecipeFile
    return RecipeClass.from_parent(collector, name=name, spec=f"{file}:{obj.__name__}")


class RecipeFile(pytest.File):
    """A file named by --torchconform: its recipes' cells."""

    def __init__(self, *, specs: List[str], **kwargs):
        super().__init__(**kwargs)
        self.specs = specs

    def collect(self):
        for spec in self.specs:
            yield from _cells(self, spec)


class RecipeClass(pytest.Collector):
    """A torchconform.Run class that a test module names: its cells."""

    def __init__(self, *, spec: str, **kwargs):
        super().__init__(**kwargs)
        self.spec = spec

    def collect(self):
        yield from _cells(self, self.spec)


def _cells(parent, spec: str):
    session = parent.config._torchconform
    try:
        recipes, checks, available = session.catalogue.recipes_of(spec)
    except _ListError as e:
        raise parent.CollectError(str(e)) from None
    if not recipes:
        raise parent.CollectError(f"'{spec}' defines no torchconform.Run recipe")
    devices = _devices(parent.config.getoption("torchconform_device"), available)
    for recipe in recipes:
        for check in _wanted_checks(parent.config, checks):
            for device in devices:
                label = f"{recipe['name']}::{check}" if isinstance(parent, RecipeFile) else check
                yield Cell.from_parent(parent, name=f"{label}[{device}]", spec=spec, recipe=recipe["name"],
                                       check=check, device=device)


class CellFailed(Exception):
    def __init__(self, cell: dict):
        super().__init__(cell.get("verdict"))
        self.cell = cell


class Cell(pytest.Item):
    """One cell: the check judged on the recipe on the device."""

    def __init__(self, *, spec: str, recipe: str, check: str, device: str, **kwargs):
        super().__init__(**kwargs)
        self.spec, self.recipe, self.check, self.device = spec, recipe, check, device
        self.add_marker("torchconform")

    def runtest(self):
        cell = self.config._torchconform.result(self)
        verdict = cell.get("verdict")
        self.user_properties.append(("torchconform_verdict", verdict))
        if verdict == "ok":
            return
        if verdict == "skipped":
            pytest.skip(_first_line(cell.get("evidence", "")) or "skipped")
        raise CellFailed(cell)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, CellFailed):
            c = excinfo.value.cell
            head = (f"{c.get('verdict')}: {c.get('check')} on {c.get('recipe')} ({c.get('device')}), "
                    f"expected {c.get('expected')}, outcome {c.get('outcome')}")
            return head + "\n" + (c.get("evidence") or "(no evidence)")
        if isinstance(excinfo.value, _RunError):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, f"torchconform {self.check} on {self.recipe} [{self.device}]"


class _RunError(Exception):
    pass


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


class _Session:
    """The one run of the selected cells, started by the first of them."""

    def __init__(self, config):
        self.config = config
        self.catalogue = _Catalogue(config)
        self._cells: Optional[Dict[Tuple[str, str, str], dict]] = None
        self._error: Optional[str] = None

    def result(self, item: Cell) -> dict:
        if self._cells is None and self._error is None:
            self._run([i for i in item.session.items if isinstance(i, Cell)])
        if self._error is not None:
            raise _RunError(self._error)
        cell = self._cells.get((item.recipe, item.check, item.device))
        if cell is None:
            raise _RunError(f"the run's report ({self.config.getoption('torchconform_json')}) has no cell for "
                            f"{item.check} on {item.recipe} ({item.device})")
        return cell

    def _run(self, items: List[Cell]) -> None:
        opt = self.config.getoption
        specs = sorted({i.spec for i in items})
        recipes = sorted({i.recipe for i in items})
        checks = sorted({i.check for i in items})
        devices = sorted({i.device for i in items})
        json_path = os.path.abspath(opt("torchconform_json"))
        html_path = os.path.abspath(opt("torchconform_html")) if opt("torchconform_html") else ""  # "": none
        args = ["run"]
        for s in specs:
            args += ["--python", s]
        args += ["--recipe", ",".join(recipes), "--check", ",".join(checks),
                 "--device", devices[0] if len(devices) == 1 else "all", "--json", json_path, "--html", html_path]
        if opt("torchconform_seed") is not None:
            args += ["--seed", str(opt("torchconform_seed"))]
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"torchconform: {len(items)} cell(s), one run: torchconform {' '.join(args)}")
        proc = subprocess.run(_command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              encoding="utf-8", errors="replace")
        if proc.returncode not in (0, 1, 77) or not os.path.isfile(json_path):
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-30:])
            self._error = f"`torchconform {' '.join(args)}` exited {proc.returncode}:\n{tail}"
            return
        with open(json_path, encoding="utf-8") as f:
            report = json.load(f)
        self._cells = {(c["recipe"], c["check"], c["device"]): c for c in report.get("cells", [])}
