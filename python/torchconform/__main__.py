"""``python -m torchconform`` and the ``torchconform`` console script: the command line of the
``torchconform`` binary (the same commands, flags and exit codes), run by the extension module
``torchconform._native`` inside this interpreter, so that a recipe imports what this environment has.

The processes a check starts again (a cell in a fresh process, a recipe's own process, torchrun's
workers) start this interpreter on ``-m torchconform`` through a small launcher script, written for
this process into a temporary folder and removed at its exit. Input and output are UTF-8 (Python's
UTF-8 mode, ``-X utf8``, whatever the locale), as in the binary's embedded interpreter.
"""
import atexit
import os
import shlex
import shutil
import sys
import tempfile


def _launcher() -> str:
    folder = tempfile.mkdtemp(prefix="torchconform-")
    owner = os.getpid()
    # Only the process that wrote it removes it (a forked recipe process never reaches atexit, but
    # a process that did must not take the launcher from the one still using it).
    atexit.register(lambda: os.getpid() == owner and shutil.rmtree(folder, ignore_errors=True))
    path = os.path.join(folder, "torchconform")
    with open(path, "w", encoding="utf-8") as f:
        f.write("#!/bin/sh\nexec %s -X utf8 -m torchconform \"$@\"\n" % shlex.quote(sys.executable))
    os.chmod(path, 0o755)
    return path


def main(argv=None) -> int:
    """Runs ``torchconform ARGV`` (default: this process's arguments) and returns its exit code."""
    args = sys.argv[1:] if argv is None else [str(a) for a in argv]
    if argv is None and not sys.flags.utf8_mode:
        # Again in UTF-8 mode, before anything was imported: a recipe printing "✓" or opening a UTF-8
        # file without an encoding then works under a C/POSIX locale, as in the binary.
        os.execv(sys.executable, [sys.executable, "-X", "utf8", "-m", "torchconform", *args])
    import faulthandler

    # A recipe that crashes the process (a segfault in an extension, abort()) leaves its Python stack
    # in the output, which the judging process quotes (harness/recipe_process.h), as in the binary.
    faulthandler.enable()
    import warnings

    # torch's own notice where NumPy is absent (the checks do not use NumPy), once per process.
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    import torch  # noqa: F401  LibTorch's libraries, loaded before the module that links them
    from torchconform import _native

    # torchrun (the multi-process checks) from this interpreter's environment, where it has one:
    # the torch wheel installs it beside the interpreter, whether or not the venv is activated.
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    if os.access(torchrun, os.X_OK):
        os.environ.setdefault("TORCHCONFORM_TORCHRUN", torchrun)
    sys.stdout.flush()
    sys.stderr.flush()
    return _native.main(["torchconform", *args], _launcher())


def console() -> None:
    """The ``torchconform`` console script."""
    sys.exit(main())


if __name__ == "__main__":
    console()
