"""A correct recipe on one-channel (grayscale) images, for the shapes check: channels_last is the
contiguous layout with one channel, so the check must find another non-contiguous one, not error.
The example's team recipe (examples/python_recipe) with Config.channels = 1."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "python_recipe"))

import torchconform  # noqa: E402
import train  # noqa: E402
from check_train import TrainRun  # noqa: E402


class GrayscaleRun(TrainRun):
    """the example's recipe on one-channel images"""

    name = "grayscale_run"

    def setup(self, options: torchconform.RunOptions) -> None:
        train.seed_everything(options.seed, options.deterministic)
        cfg = train.Config(seed=options.seed, channels=1, checkpoint_activations=options.activation_checkpointing)
        self.trainer = train.Trainer(cfg, options.device)
