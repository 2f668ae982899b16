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
__all__ = ["AmpOptions", "EvalResult", "InitSpec", "default_init", "ModelStateNotFound", "RepeatedBatches", "Run", "RunOptions", "StepRecord", "find_model_state"]


def __getattr__(name):
    # The API is torchconform.run's, which imports torch: imported on first use (``torchconform.Run``,
    # ``from torchconform import Run``), not by ``import torchconform`` itself, so that the console
    # script, which starts the interpreter again in UTF-8 mode before anything else, and
    # ``python -m torchconform`` do not import torch twice (about 1.5 s each time).
    if name in __all__:
        from torchconform import run

        return getattr(run, name)
    raise AttributeError(f"module 'torchconform' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
