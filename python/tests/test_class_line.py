"""torchconform._bridge.class_line: the line `--python` names a recipe class by, from one parse of its
file, is the line inspect.getsourcelines gives, for the shapes a class statement takes (decorated,
nested, in a function, two of one name in different scopes, a file edited after it was read) and for
every recipe class the repository ships. Standard library only (unittest):

    python3 python/tests/test_class_line.py
"""
import importlib.util
import inspect
import os
import shutil
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path[:0] = [os.path.join(HERE, ".."), os.path.join(HERE, "..", "reference"), HERE]

from torchconform import _bridge  # noqa: E402

SHAPES = '''
import functools


def deco(cls):
    return cls


class Plain:
    pass


@deco
@functools.total_ordering
class Decorated:
    def __lt__(self, other):
        return False


class Outer:
    class Inner:
        class Innermost:
            pass


def make():
    class Local:
        pass
    return Local


class Twin:
    pass


def other_scope():
    class Twin:
        pass
    return Twin


if True:
    class InABlock:
        pass
'''


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class ClassLine(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tc-class-line-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.path = os.path.join(self.dir, "shapes.py")
        with open(self.path, "w", encoding="utf-8") as f:
            f.write(SHAPES)
        self.m = load(self.path, "tc_class_line_shapes")

    def classes(self):
        m = self.m
        return [m.Plain, m.Decorated, m.Outer, m.Outer.Inner, m.Outer.Inner.Innermost, m.make(), m.Twin,
                m.other_scope(), m.InABlock]

    def test_each_shape_as_inspect_gives_it(self):
        for cls in self.classes():
            with self.subTest(cls=cls.__qualname__):
                self.assertEqual(_bridge.class_line(cls), inspect.getsourcelines(cls)[1])
        self.assertEqual(_bridge.class_line(self.m.Decorated), SHAPES.splitlines().index("@deco") + 1)

    def test_a_file_edited_after_it_was_read_is_read_again(self):
        before = _bridge.class_line(self.m.Plain)
        with open(self.path, "w", encoding="utf-8") as f:
            f.write("\n\n\n" + SHAPES)
        os.utime(self.path, ns=(0, os.stat(self.path).st_mtime_ns + 10**9))
        self.assertEqual(_bridge.class_line(self.m.Plain), before + 3)

    def test_no_source_is_line_0(self):
        self.assertEqual(_bridge.class_line(int), 0)
        os.remove(self.path)
        self.assertEqual(_bridge.class_line(self.m.Plain), 0)

    def test_every_shipped_recipe_class(self):
        files = [os.path.join(ROOT, "python", "reference", "reference.py"),
                 os.path.join(ROOT, "python", "reference", "variants.py"),
                 os.path.join(ROOT, "examples", "python_recipe", "check_train.py")]
        files += [os.path.join(HERE, f) for f in sorted(os.listdir(HERE)) if f.endswith("_run.py") or f == "hostile.py"]
        checked = 0
        for path in files:
            for spec in _bridge.expand(path):
                cls = _bridge.load(spec)[0]
                with self.subTest(spec=spec):
                    self.assertEqual(_bridge.class_line(cls), inspect.getsourcelines(cls)[1])
                checked += 1
        self.assertGreater(checked, 50)


if __name__ == "__main__":
    unittest.main(verbosity=2)
