"""A recipe's fork server started as a fork of a template its process made before its first cell,
not as a new interpreter. Internal: not the recipe API.

multiprocessing's "forkserver" start method (the Python reference's DataLoader asks for it; Python
3.14's default) runs its server as a new interpreter, ``python -c "from multiprocessing.forkserver
import main; main(...)"``, which imports the modules it is asked to preload (torch: 1.3 s of CPU on
the 2-core machine, measured) before it forks the first worker. A process that runs recipes' code
(a recipe's process, forked from the judging process or started by exec; a torchrun rank; a part's
fresh process) has torch imported already. Before its first cell, while it still has one thread and
none of its recipes has been set up (their files are imported), `start_template()` forks a
*template* that waits (forking::recipe_process_start, harness/util/forking.h). When the recipe
starts its fork server, the template is handed what the new interpreter would have been given: the
command, the same file descriptors at the same numbers (stdin, stdout and stderr as they are then,
the server's listener and its "alive" pipe), the working directory, the environment, sys.path and
the process group; it closes every other descriptor and runs that command as the new interpreter
would have. The preload's imports find their modules imported. The server is a child of the
recipe's process, as the spawned one would be (multiprocessing waits on its pid).

What differs from a new interpreter: the modules the process had imported before the template
(torch, this package, the recipes' modules) are in sys.modules already, and the interpreter's
command-line flags are this process's. The state the recipes' set-up and steps make is not: the
template was made before the first cell. Anything else (a second server in the same process, a
template gone, another process than the one that made it, a process with threads before its first
cell, no socket.send_fds) starts the new interpreter as before.
"""
from __future__ import annotations

import builtins
import fcntl
import gc
import os
import pickle
import signal
import socket
import sys
from typing import Optional

import multiprocessing.util as _util

# The command multiprocessing.forkserver.ensure_running() gives the new interpreter.
_SERVER = "from multiprocessing.forkserver import main"
_MAX_MESSAGE = 1 << 20
_MAX_FDS = 64
# How long the template may take to answer (it moves a few descriptors: milliseconds).
_HAND_OVER_S = 60.0


class _Template:
    def __init__(self, pid: int, sock: socket.socket, owner: int):
        self.pid, self.sock, self.owner = pid, sock, owner


_template: Optional[_Template] = None
_spawn = _util.spawnv_passfds  # replaced below; the one called when no template serves


def template_pid() -> Optional[int]:
    """The waiting template's pid in this process, None when there is none (tests)."""
    t = _template
    return t.pid if t is not None and t.owner == os.getpid() else None


def start_template() -> None:
    """In a process that runs recipes' code, before its first cell, while it has one thread
    (forking::recipe_process_start, harness/util/forking.h): fork the template. Never raises: without
    a template the fork server starts as a new interpreter."""
    global _template
    if _template is not None and _template.owner == os.getpid():
        return  # this process has one (or gave it to its server)
    _template = None
    if not hasattr(socket, "send_fds"):
        return
    try:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
    except OSError:
        return
    if pid == 0:
        code = 1
        try:
            ours.close()
            code = _serve(theirs)
        except BaseException:  # the template's end, whatever it was: never back into the caller's code
            pass
        finally:
            os._exit(code)
    theirs.close()
    _template = _Template(pid, ours, os.getpid())


def _command(args) -> Optional[str]:
    for i in range(1, len(args)):
        if args[i - 1] == "-c" and isinstance(args[i], str) and _SERVER in args[i]:
            return args[i]
    return None


def _open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def _environment() -> dict:
    """The process's environment as exec would pass it on (C's environ: os.environ is a copy taken at
    the interpreter's start, and the recipe's process was given variables after that)."""
    try:
        import ctypes

        environ = ctypes.POINTER(ctypes.c_char_p).in_dll(ctypes.CDLL(None), "environ")
        env, i = {}, 0
        while environ[i] is not None:
            key, sep, value = environ[i].partition(b"=")
            if sep:
                env[key] = value
            i += 1
        return env
    except (OSError, ValueError, AttributeError):
        return {k.encode(): v.encode() for k, v in os.environ.items()}


def spawnv_passfds(path, args, passfds):
    """multiprocessing.util.spawnv_passfds, which starts the fork server (and spawned processes):
    the fork server from the template where this process has one waiting, else as before."""
    global _template
    t, code = _template, _command(args)
    if t is not None and t.owner == os.getpid() and code is not None:
        _template = None  # one server per template
        try:
            numbers = [fd for fd in (0, 1, 2) if _open(fd)] + [int(fd) for fd in passfds]
            request = {"code": code, "fds": numbers, "cwd": os.getcwd(), "env": _environment(),
                       "sys_path": list(sys.path), "pgid": os.getpgid(0)}
            t.sock.settimeout(_HAND_OVER_S)
            socket.send_fds(t.sock, [pickle.dumps(request)], numbers)
            if t.sock.recv(16) == b"ok":
                return t.pid
        except (OSError, pickle.PickleError):
            pass
        finally:
            t.sock.close()
        try:  # not handed over (gone, refused, or silent past the limit): never a second server beside ours
            os.kill(t.pid, signal.SIGKILL)
        except OSError:
            pass
    return _spawn(path, args, passfds)


def _serve(sock: socket.socket) -> int:
    """The template: wait for the request, then become the fork server (its exit code)."""
    gc.freeze()  # inherited objects that own descriptors are never collected here, so never close one
    try:
        message, fds, _, _ = socket.recv_fds(sock, _MAX_MESSAGE, _MAX_FDS)
    except OSError:
        return 0
    if not message:
        return 0  # the recipe's process ended (or closed its end) without asking
    request = pickle.loads(message)
    numbers = request["fds"]
    if len(numbers) != len(fds):
        sock.send(b"no")
        return 1
    # Every received descriptor and the socket above every number they must take, every other
    # descriptor closed (as a new interpreter started with close_fds), then each in its place.
    floor = max(numbers + [2]) + 1
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD, floor) for fd in fds]
    control = fcntl.fcntl(sock.detach(), fcntl.F_DUPFD, floor)
    keep = sorted(set(moved) | {control})
    low = 0
    for fd in keep:
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))
    for fd, number in zip(moved, numbers):
        os.dup2(fd, number)
        os.close(fd)
    try:
        os.setpgid(0, request["pgid"])  # the recipe's process group, which the judging process stops
    except OSError:
        pass
    try:
        os.chdir(request["cwd"])
    except OSError:
        pass
    os.environ.clear()
    try:
        import ctypes

        ctypes.CDLL(None).clearenv()
    except (OSError, AttributeError):
        pass
    os.environb.update(request["env"])
    sys.path[:] = request["sys_path"]
    sys.argv = ["-c"]
    # Signal dispositions as a new interpreter has them.
    for s in signal.valid_signals():
        if s in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            signal.signal(s, signal.SIG_DFL)
        except (OSError, ValueError, RuntimeError):
            pass
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    os.write(control, b"ok")
    os.close(control)
    try:
        exec(compile(request["code"], "<string>", "exec"), {"__name__": "__main__", "__builtins__": builtins})
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return 0


def end_of_process() -> None:
    """At the end of a process that ran recipes' code and ends without its interpreter's exit
    handlers (os._exit after a fork; the embedded Python is never finalized): what multiprocessing's
    exit handler would do for the temporary directory it made in this process (pymp-*, where the
    fork server's listener socket is), which otherwise stays in the temporary folder, one for every
    such process whose DataLoader had workers (forking::recipe_process_end, harness/util/forking.h).
    Only that directory's finalizer, and only one this process registered: a forked child inherits
    its parent's, which name the parent's pid. Safe to call more than once; never raises."""
    try:
        remove = getattr(_util, "_remove_temp_dir", None)
        registry = getattr(_util, "_finalizer_registry", None)
        if remove is None or not isinstance(registry, dict):
            return
        for finalizer in list(registry.values()):
            if getattr(finalizer, "_callback", None) is remove and getattr(finalizer, "_pid", None) == os.getpid():
                finalizer()
    except Exception:  # noqa: BLE001 - the process is ending: nothing here may change how it ends
        pass


def install() -> None:
    """Put spawnv_passfds in multiprocessing's place, over whatever is there (the bridge's sys.path
    fix for old CPythons wraps the original first); once."""
    global _spawn
    if _util.spawnv_passfds is not spawnv_passfds:
        _spawn = _util.spawnv_passfds
        _util.spawnv_passfds = spawnv_passfds
