"""The Python reference with its bare_model() probe taken away, as a subject: a correct loop that
gives no bare model. fsdp must record `checkpoint_loads_bare` as not judged, never broken (it was
broken before: the probe's "not provided" was caught as a load that raised)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))

import torchconform  # noqa: E402
from reference import PythonReference  # noqa: E402


class NoBareModelRun(PythonReference):
    """the Python reference without a bare_model() probe (a subject)"""

    name = "no_bare_model_run"
    control = False
    bare_model = torchconform.Run.bare_model  # not overridden: the probe is not provided
