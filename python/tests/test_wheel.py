"""The wheel, as a Python team gets it (issue 41): built from this repository by its build backend
(pyproject.toml, scikit-build-core), installed into a fresh venv that holds only the pinned torch and
pytest (and their dependencies), and used from there with no PYTHONPATH and no build tree:

  - `torchconform --help` and `python -m torchconform list --python check_train.py` (the console
    script and the module, the same command line as the binary);
  - `torchconform run --python check_train.py:TrainRun` on the example (examples/python_recipe),
    the cells ok, language python, the report written;
  - the pytest plugin on a file named with --torchconform (-k picks cells) and on a test file that
    names its Run classes, one of which breaks eval_mode: that item fails with the evidence, the
    other passes, and --junitxml records both.

The venv is made quickly: its packages are hard links to the files of the project's venv (the same
wheels pip installed there, RECORD by RECORD), so nothing is downloaded. The wheel is built in
build-wheel/ beside build/, whose objects ccache already holds (CMakeLists.txt: CCACHE_BASEDIR): a
link, not a second compile. Standard library only (unittest):

    python3 python/tests/test_wheel.py SOURCE_DIR BUILD_DIR WORK_DIR
"""
import glob
import importlib.metadata as metadata
import json
import os
import re
import shutil
import subprocess
import sys
import time
import unittest
import xml.etree.ElementTree as ET

SOURCE = None
BUILD = None
WORK = None
CHECKS = "reproducibility,eval_mode"

BROKEN_TEST_FILE = '''\
"""A team's test file naming its recipes: the example's loop, and the same loop with eval() lost."""
from check_train import TrainRun


class ForgetsEval(TrainRun):
    """the example's loop whose evaluation never leaves training mode (model.eval() lost in a refactor)"""

    def evaluate(self):
        model = self.trainer.model
        real_eval = model.eval
        model.eval = lambda: model  # evaluate() still calls eval(); it no longer does anything
        try:
            return super().evaluate()
        finally:
            model.eval = real_eval
'''


def closure(names):
    """The distributions `names` need, by name: their requirements whose markers hold here, with the
    extras asked for (torch asks for cuda-toolkit[cudart,...]: those extras' requirements too)."""
    from packaging.requirements import Requirement

    seen, todo = {}, [(n, ()) for n in names]
    done = set()
    while todo:
        name, extras = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if (key, extras) in done:
            continue
        done.add((key, extras))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen[key] = dist
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in (extras or ("",))):
                todo.append((req.name, tuple(sorted(req.extras))))
    return seen


def fresh_venv(path, packages):
    """A venv at `path` whose site-packages holds `packages` and their dependencies, and pip, hard
    linked from this interpreter's (each distribution's RECORD: its files and its .dist-info; pip's
    own, not ensurepip's second install of it, which took 4.3 s of the 8)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", path], check=True)
    packages = [*packages, "pip"]
    site = subprocess.run([os.path.join(path, "bin", "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    for dist in closure(packages).values():
        root = str(dist.locate_file(""))
        for f in dist.files or []:
            rel = str(f)
            if rel.startswith("..") or os.path.isabs(rel):
                continue  # scripts in bin/ (torchrun): not needed here
            src, dst = os.path.join(root, rel), os.path.join(site, rel)
            if not os.path.isfile(src) or os.path.exists(dst):
                continue
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)
    return path


def same_compiler(build_dir):
    """pip's config settings that give the wheel's CMake the compiler and the warning flags the build
    used, so that its compile commands are the build's and ccache serves them: ccache keys on the
    compiler's name too (/usr/bin/c++ and /usr/bin/g++ are one program and two keys) and on every
    flag (TC_WERROR adds -Wall -Werror)."""
    settings = []
    with open(os.path.join(build_dir, "CMakeCache.txt"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("CMAKE_CXX_COMPILER:"):
                settings += ["-C", "cmake.define.CMAKE_CXX_COMPILER=" + line.split("=", 1)[1].strip()]
            elif line.startswith("TC_WERROR:"):
                settings += ["-C", "cmake.define.TC_WERROR=" + line.split("=", 1)[1].strip()]
    return settings


def clean_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TORCHCONFORM_", "VIRTUAL_ENV"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


class Wheel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        shutil.rmtree(WORK, ignore_errors=True)
        os.makedirs(WORK)
        t0 = time.monotonic()
        dist = os.path.join(WORK, "dist")
        # One job: ccache serves every object the build compiled (the same commands, same_compiler),
        # so the build is links and cache hits, and the test holds one core (ctest PROCESSORS 1).
        env = dict(os.environ, CMAKE_BUILD_PARALLEL_LEVEL=os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "1"))
        build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q",
                                "-w", dist, *same_compiler(BUILD), SOURCE], env=env, capture_output=True, text=True)
        if build.returncode != 0:
            raise AssertionError("pip wheel failed:\n" + (build.stdout + build.stderr)[-6000:])
        wheels = glob.glob(os.path.join(dist, "torchconform-*.whl"))
        assert len(wheels) == 1, wheels
        cls.wheel = wheels[0]
        t1 = time.monotonic()
        cls.venv = fresh_venv(os.path.join(WORK, "venv"), ["torch", "pytest"])
        cls.python = os.path.join(cls.venv, "bin", "python")
        subprocess.run([cls.python, "-m", "pip", "install", "-q", "--no-index", "--disable-pip-version-check", cls.wheel],
                       check=True, env=clean_env())
        t2 = time.monotonic()
        # The team's directory: the example's two files, nothing of this repository beside them.
        cls.team = os.path.join(WORK, "team")
        os.makedirs(cls.team)
        for f in ("train.py", "check_train.py"):
            shutil.copy(os.path.join(SOURCE, "examples", "python_recipe", f), cls.team)
        with open(os.path.join(cls.team, "test_loop.py"), "w", encoding="utf-8") as f:
            f.write(BROKEN_TEST_FILE)
        with open(os.path.join(cls.team, "pytest.ini"), "w", encoding="utf-8") as f:
            f.write("[pytest]\n")  # the team's own project: pytest's rootdir is here, not this repository
        print(f"wheel {os.path.basename(cls.wheel)}: {os.path.getsize(cls.wheel) / 2**20:.1f} MiB, built in {t1 - t0:.0f} s; "
              f"venv + install {t2 - t1:.0f} s", file=sys.stderr)

    def run_in_team(self, *args, timeout=900):
        return subprocess.run(list(args), cwd=self.team, env=clean_env(), capture_output=True, text=True,
                              encoding="utf-8", errors="replace", timeout=timeout)

    def test_0_nothing_outside_the_venv(self):
        """The installed module links only what the venv holds and the system's C and C++ runtime."""
        site = subprocess.run([self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()
        module = glob.glob(os.path.join(site, "torchconform", "_native*.so"))
        self.assertEqual(len(module), 1, module)
        ldd = subprocess.run(["ldd", module[0]], capture_output=True, text=True, check=True).stdout
        system_ok = re.compile(r"^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libutil\.so|"
                               r"libstdc\+\+\.so|libgcc_s\.so)")
        outside = []
        for line in ldd.splitlines():
            parts = line.split()
            if not parts:
                continue
            name = parts[0]
            target = parts[2] if len(parts) > 2 and parts[1] == "=>" else ""
            self.assertNotEqual(target, "not", f"unresolved: {line}")
            if system_ok.match(name) or not target:
                continue
            if not os.path.realpath(target).startswith(os.path.realpath(self.venv)):
                outside.append(line.strip())
        self.assertEqual(outside, [], "libraries resolved outside the venv:\n" + "\n".join(outside))
        self.assertNotIn("libpython", ldd)

    def test_1_command_line(self):
        helped = self.run_in_team(os.path.join(self.venv, "bin", "torchconform"), "--help")
        self.assertEqual(helped.returncode, 0, helped.stderr)
        self.assertIn("run", helped.stdout)
        listed = self.run_in_team(self.python, "-m", "torchconform", "list", "--json", "--python", "check_train.py")
        self.assertEqual(listed.returncode, 0, listed.stderr[-3000:])
        names = [r["name"] for r in json.loads(listed.stdout)["recipes"] if r["language"] == "python"]
        self.assertEqual(names, ["train_run"])
        # The console script starts the interpreter again (UTF-8 mode) before it imports torch: the
        # package and its __main__ import nothing of torch (the API is imported on first use).
        lazy = self.run_in_team(self.python, "-c", "import sys, torchconform.__main__ as m; print(sorted(k for k in sys.modules "
                                "if k == 'torch' or k.startswith('torch.')))")
        self.assertEqual((lazy.returncode, lazy.stdout.strip()), (0, "[]"), lazy.stderr[-2000:])
        # The module that ran is the venv's, imported by the venv's interpreter.
        where = self.run_in_team(self.python, "-c", "import sys, torchconform._native as n; print(n.__file__); print(sys.prefix)")
        module, prefix = where.stdout.split()
        self.assertTrue(os.path.realpath(module).startswith(os.path.realpath(self.venv)), module)
        self.assertEqual(os.path.realpath(prefix), os.path.realpath(self.venv))

    def readme(self):
        with open(os.path.join(SOURCE, "examples", "python_recipe", "README.md"), encoding="utf-8") as f:
            text = f.read()
        commands = re.search(r"## The two commands.*?```sh\n(.*?)```", text, re.S).group(1).strip().splitlines()
        table = text[text.index("<!-- verdicts:"):text.index("<!-- end verdicts -->")]
        rows = {}
        for line in table.splitlines():
            cols = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cols) == 3 and cols[0] not in ("check", "---") and not cols[0].startswith("-"):
                rows[cols[0]] = cols[1]
        return commands, rows

    def test_2_the_readme(self):
        """The example README's second command as typed, in the team's directory: every row of its
        table holds the verdict the run gives, and `list`'s outlook agrees with what was skipped."""
        commands, rows = self.readme()
        self.assertEqual(len(commands), 2, commands)
        self.assertTrue(commands[0].startswith("pip install torchconform-"), commands[0])
        run = commands[1].split("#")[0].split()
        self.assertEqual(run[:2], ["torchconform", "run"], run)
        t0 = time.monotonic()
        done = self.run_in_team(os.path.join(self.venv, "bin", run[0]), *run[1:])
        print(f"README command 2: exit {done.returncode} in {time.monotonic() - t0:.0f} s", file=sys.stderr)
        with open(os.path.join(self.team, "reports", "latest.json"), encoding="utf-8") as f:
            report = json.load(f)
        cells = {c["check"]: c for c in report["cells"]}
        self.assertEqual({c["recipe"] for c in report["cells"]}, {"train_run"})
        for c in cells.values():
            self.assertEqual((c["language"], c["role"]), ("python", "subject"))
        got = {check: c["verdict"] for check, c in cells.items()}
        self.assertEqual(rows, got, "the README's table is stale: " + json.dumps(
            {k: {"readme": rows.get(k), "run": got.get(k), "evidence": cells[k]["evidence"][:300] if k in cells else ""}
             for k in set(rows) | set(got) if rows.get(k) != got.get(k)}, indent=1))
        self.assertEqual(done.returncode, 1 if "fail" in got.values() else 0, done.stderr[-3000:])
        # The forecast of `list --python` (from the class) against the run.
        listed = self.run_in_team(self.python, "-m", "torchconform", "list", "--json", "--python", "check_train.py")
        self.assertEqual(listed.returncode, 0, listed.stderr[-3000:])
        (recipe,) = json.loads(listed.stdout)["python_recipes"]
        for o in recipe["checks"]:
            verdict = got[o["check"]]
            if o["judged"] == "no":
                self.assertEqual(verdict, "skipped", f"{o['check']}: forecast skipped ({o['why']}), the run gave {verdict}")
            elif o["judged"] == "yes":
                self.assertNotEqual(verdict, "skipped", f"{o['check']}: forecast judged, the run skipped: "
                                    + cells[o["check"]]["evidence"][:300])

    def test_3_pytest_plugin(self):
        junit = os.path.join(self.team, "junit.xml")
        # A file named on the command line; -k keeps one of its two checks.
        picked = self.run_in_team(self.python, "-m", "pytest", "-p", "no:cacheprovider", "--torchconform", "check_train.py",
                                  "--torchconform-device", "cpu", "--torchconform-check", CHECKS, "-k", "eval_mode",
                                  "--torchconform-json", "reports/pytest.json", "--torchconform-html", "",
                                  "check_train.py", "-rA")
        self.assertEqual(picked.returncode, 0, picked.stdout[-4000:] + picked.stderr[-2000:])
        self.assertIn("1 passed, 1 deselected", picked.stdout)
        # A test file naming its Run classes: the example's passes, the broken one fails with evidence.
        judged = self.run_in_team(self.python, "-m", "pytest", "-p", "no:cacheprovider", "test_loop.py",
                                  "--torchconform-device", "cpu", "--torchconform-check", "eval_mode",
                                  "--torchconform-json", "reports/pytest.json", "--torchconform-html", "reports/pytest.html",
                                  f"--junitxml={junit}", "-rA")
        print(judged.stdout[-6000:], file=sys.stderr)
        self.assertEqual(judged.returncode, 1, judged.stdout[-4000:] + judged.stderr[-2000:])
        self.assertIn("1 failed, 1 passed", judged.stdout)
        self.assertIn("fail: eval_mode on forgets_eval (cpu)", judged.stdout)
        cases = list(ET.parse(junit).getroot().iter("testcase"))
        self.assertEqual(sorted(c.get("name") for c in cases), ["eval_mode[cpu]", "eval_mode[cpu]"])
        failed = [c.get("classname") for c in cases if c.find("failure") is not None]
        self.assertEqual(len(failed), 1, failed)
        self.assertIn("ForgetsEval", failed[0])

if __name__ == "__main__":
    SOURCE, BUILD, WORK = (os.path.abspath(a) for a in sys.argv[1:4])
    unittest.main(argv=[sys.argv[0], "-v"])
