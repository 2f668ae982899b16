"""torchconform's Python recipe API: the Python twin of ``tc::Run`` (harness/contract/run.h).

A recipe is one complete way to train: seeding, model, data, train step, evaluation, checkpoint.
torchconform's checks are C++ and drive a recipe only through ``tc::Run``; a Python recipe is a
subclass of :class:`Run` that the ``torchconform`` binary runs in the Python interpreter it embeds,
so the same checks judge it unchanged::

    import torchconform

    class MyRun(torchconform.Run):
        def setup(self, options: torchconform.RunOptions) -> None: ...
        def train_step(self) -> torchconform.StepRecord: ...
        ...

    $ torchconform run --python path/to/my_run.py:MyRun          # recipe name: my_run
    $ torchconform run --python path/to/my_run.py:MyRun=prod_loop

Tensors cross between Python and C++ without copies: what :meth:`Run.parameters` returns are the
module's live tensors, and the checks see exactly them.
"""
from torchconform.run import AmpOptions, EvalResult, InitSpec, default_init, ModelStateNotFound, RepeatedBatches, Run, RunOptions, StepRecord, find_model_state

__all__ = ["AmpOptions", "EvalResult", "InitSpec", "default_init", "ModelStateNotFound", "RepeatedBatches", "Run", "RunOptions", "StepRecord", "find_model_state"]
