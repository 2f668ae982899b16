"""What a fork server's child finds at its start (python/bridge/tests/bridge_test.cpp): whether the
modules the server was asked to preload are already imported. Imports nothing of its own, so that
unpickling this function in the child imports nothing either."""
import sys


def preloaded(names, queue) -> None:
    queue.put({name: name in sys.modules for name in names})
