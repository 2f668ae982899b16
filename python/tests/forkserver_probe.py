"""What a fork server's child finds at its start (python/bridge/tests/bridge_test.cpp): whether the
modules the server was asked to preload are already imported. Imports nothing of its own, so that
unpickling this function in the child imports nothing either."""
import sys


def preloaded(names, queue) -> None:
    queue.put({name: name in sys.modules for name in names})


def started_with(names, fd, inode, env_name, queue) -> None:
    """What a worker finds at its start: the preload, whether descriptor `fd` is still the pipe of
    inode `inode` (one its server's parent held before the server started), a variable, its group."""
    import os

    try:
        same_pipe = os.fstat(fd).st_ino == inode
    except OSError:
        same_pipe = False
    queue.put({"preloaded": {name: name in sys.modules for name in names}, "inherited_pipe": same_pipe,
               "env": os.environ.get(env_name), "pgid": os.getpgid(0)})
