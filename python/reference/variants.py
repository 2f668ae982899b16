"""Broken variants of the Python reference: each the seeds' "Fail:" code for one practice.

Each class derives from :class:`reference.PythonReference` and replaces exactly one of its slots the
way real code gets it wrong, and declares the check that must catch it and the promise it breaks
(``must_be_caught_by`` / ``breaks``, as a C++ variant's ``->MustBeCaughtBy(...)->Breaks(...)``).

    torchconform run --python python/reference/reference.py:PythonReference \\
                     --python python/reference/variants.py:NoEval ...

The amp variants come after the others (``amp_dtypes``: the bridge's AmpProbe), then the DDP ones
(``make_distributed()``: the seeds' DDP code of ddp_reference.py with one practice broken).
"""
from __future__ import annotations

import os
import random
from typing import Dict

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

import torchconform
from ddp_reference import PythonDdpReference
from reference import (CHANNELS, CLASSES, CLIP_NORM, DROPOUT, IMAGE_SIZE, INTEGRITY_KEY, AugmentedBatches,
                       ImageClassifier, PythonReference, init_weights, state_digest)


# --- eval_mode -----------------------------------------------------------------------------------
class NoEval(PythonReference):
    """evaluate() never calls model.eval(): dropout and batch norm stay in training mode"""

    name = "py_no_eval"
    must_be_caught_by = ("eval_mode",)
    breaks = {"eval_mode": ("eval_bitwise", "bn_stats_untouched")}

    @torch.no_grad()
    def evaluate(self) -> torchconform.EvalResult:
        return self.eval_loop()  # the seeds' Fail: `with torch.no_grad(): ...` and no model.eval()


class NoGradMissing(PythonReference):
    """evaluate() calls model.eval() but runs without torch.no_grad(): autograd records the graph"""

    name = "py_no_grad_missing"
    must_be_caught_by = ("eval_mode",)
    breaks = {"eval_mode": ("no_autograd_graph",)}

    def evaluate(self) -> torchconform.EvalResult:
        self.model.eval()
        return self.eval_loop()


class NoTrainAfterEval(PythonReference):
    """the next epoch does not call model.train(): training goes on in eval mode after an evaluation"""

    name = "py_no_train_after_eval"
    must_be_caught_by = ("eval_mode",)
    breaks = {"eval_mode": ("train_mode_restored",)}

    def begin_epoch(self) -> None:
        self.sampler.set_epoch(self.epoch)  # model.train() left out


# --- reproducibility -----------------------------------------------------------------------------
class NoSeed(PythonReference):
    """set_seed() is never called: `model = MyModel()` draws weights and dropout from torch's unseeded state"""

    name = "py_no_seed"
    must_be_caught_by = ("reproducibility",)
    breaks = {"reproducibility": ("same_seed_bitwise", "other_process_bitwise")}

    def seed_everything(self) -> None:
        pass


class OwnRandomBatches(AugmentedBatches):
    """The augmentation's flips and shifts from a generator of the dataset's own, never seeded."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        super().__init__(images, labels)
        self.rng = random.Random()  # seeded from the OS: no seed, worker_init_fn or generator reaches it

    def augment(self, images: torch.Tensor, seed: int) -> torch.Tensor:
        out = []
        for img in images:  # (3, S, S)
            if self.rng.random() < 0.5:
                img = img.flip(2)
            out.append(img.roll((self.rng.randint(-2, 2), self.rng.randint(-2, 2)), (1, 2)))
        return torch.stack(out)


class UnseededWorkers(PythonReference):
    """the loader workers' augmentation draws from an unseeded source (the dataset's own random.Random())"""

    name = "py_unseeded_workers"
    must_be_caught_by = ("reproducibility", "data_saturation")
    breaks = {"reproducibility": ("same_seed_bitwise", "other_process_bitwise"),
              "data_saturation": ("worker_augmentations",)}

    def make_loader(self):
        self.train_set = OwnRandomBatches(self.train_set.images, self.train_set.labels)
        return super().make_loader()


# --- data_saturation ("Keep the GPU fed") ---------------------------------------------------------
class LoaderDefaults(PythonReference):
    """DataLoader on its defaults: num_workers=0, batches made in the training process"""

    name = "py_loader_defaults"
    must_be_caught_by = ("data_saturation",)
    breaks = {"data_saturation": ("data_wait",)}

    def loader_workers(self, host_trains: bool) -> int:
        return 0  # Fail: DataLoader(dataset, batch_size=32, shuffle=True)


# --- resume_equality -----------------------------------------------------------------------------
class WeightsOnlyCheckpoint(PythonReference):
    """the checkpoint holds the model's state_dict only: `torch.save(model.state_dict(), path)`"""

    name = "py_weights_only_checkpoint"
    must_be_caught_by = ("resume_equality",)
    breaks = {"resume_equality": ("resume_bitwise",)}

    def checkpoint_state(self) -> Dict[str, object]:
        return {"model_state_dict": self.model.state_dict()}

    def restore(self, state: Dict[str, object]) -> None:
        self.model.load_state_dict(state["model_state_dict"])


class _LeavesOut(PythonReference):
    """A checkpoint without one entry; loading does without it."""

    left_out = ""

    def checkpoint_state(self) -> Dict[str, object]:
        state = super().checkpoint_state()
        del state[self.left_out]
        return state

    def restore(self, state: Dict[str, object]) -> None:
        full = super().checkpoint_state()  # this fresh run's own, for the part the file lacks
        super().restore({**full, **state})


class NoOptimizerState(_LeavesOut):
    """the checkpoint leaves out optimizer.state_dict() (momentum, learning rate)"""

    name = "py_no_optimizer_state"
    must_be_caught_by = ("resume_equality",)
    breaks = {"resume_equality": ("resume_bitwise",)}
    left_out = "optimizer_state_dict"


class NoSchedulerState(_LeavesOut):
    """the checkpoint leaves out scheduler.state_dict(): StepLR's count starts over on resume"""

    name = "py_no_scheduler_state"
    must_be_caught_by = ("resume_equality",)
    breaks = {"resume_equality": ("resume_bitwise",)}
    left_out = "scheduler_state_dict"
    # Missed by resume_equality as it stands (measured): it resumes at k = 9, a multiple of StepLR's
    # step_size 3, and Python's StepLR is chainable (it multiplies the rate the optimizer's restored
    # state holds), so a count restarted at 0 decays at the very same steps. Resumed at k = 7 or 8
    # the rate of step 9 differs (0.032 against 0.0256): the variant is broken, the check's k hides it.


class NoRngState(_LeavesOut):
    """the checkpoint leaves out the RNG states (torch CPU/CUDA, Python's random, the loader's)"""

    name = "py_no_rng_state"
    must_be_caught_by = ("resume_equality",)
    breaks = {"resume_equality": ("resume_bitwise",)}
    left_out = "rng"


class NoSamplerPosition(PythonReference):
    """the checkpoint leaves out the sampler's epoch order and position: the epoch restarts on resume"""

    name = "py_no_sampler_position"
    must_be_caught_by = ("resume_equality",)
    breaks = {"resume_equality": ("resume_bitwise",)}

    def checkpoint_state(self) -> Dict[str, object]:
        state = super().checkpoint_state()
        del state["sampler"]
        return state

    def restore(self, state: Dict[str, object]) -> None:
        sampler = {"position": 0, **self.sampler.state_dict()}
        super().restore({**state, "sampler": sampler})
        if self.epoch >= 0:
            self.begin_epoch()  # a DataLoader starts its epoch over: a new order from its generator


# --- shapes --------------------------------------------------------------------------------------
class ViewClassifier(ImageClassifier):
    def forward(self, x):
        x = self.extract_features(x)
        x = x.view(x.size(0), -1)  # the seeds' Fail: fails on a non-contiguous (channels_last) tensor
        return self.classifier(x)


class ViewFlatten(PythonReference):
    """flattens with x.view(x.size(0), -1) instead of x.flatten(start_dim=1)"""

    name = "py_view_flatten"
    must_be_caught_by = ("shapes",)
    breaks = {"shapes": ("non_contiguous_input",)}

    def make_model(self) -> nn.Module:
        model = ViewClassifier(CLASSES, IMAGE_SIZE, DROPOUT, CHANNELS)
        model.apply(init_weights)
        return model


# --- device_agnostic -----------------------------------------------------------------------------
class HardcodedCuda(PythonReference):
    """moves the model with .cuda() whatever device was resolved"""

    name = "py_hardcoded_cuda"
    must_be_caught_by = ("device_agnostic",)
    breaks = {"device_agnostic": ("runs_on_every_device",)}

    def to_device(self, model: nn.Module) -> nn.Module:
        return model.cuda()  # the seeds' Fail: `model = MyModel().cuda()`


# --- init ----------------------------------------------------------------------------------------
class DefaultInit(PythonReference):
    """trusts the layers' default initialisation (no model.apply(init_weights)) while declaring it"""

    name = "py_default_init"
    must_be_caught_by = ("init",)
    breaks = {"init": ("declared_init",)}

    def make_model(self) -> nn.Module:
        return ImageClassifier(CLASSES, IMAGE_SIZE, DROPOUT, CHANNELS)


# --- autograd_inplace ----------------------------------------------------------------------------
class InplaceOnSaved(PythonReference):
    """after the forward, the input batch is rescaled in place (an image logger): the convolution saved it"""

    name = "py_inplace_on_saved"
    must_be_caught_by = ("autograd_inplace",)
    breaks = {"autograd_inplace": ("no_inplace_on_saved",)}

    def forward_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        loss = super().forward_loss(x, y)
        x.mul_(0.5).add_(0.5)  # to [0, 1] for the image logger, in place
        return loss


class SilentInplaceOnSaved(PythonReference):
    """the same rescaling through .data: no version-counter bump, the gradient silently wrong"""

    name = "py_silent_inplace_on_saved"
    must_be_caught_by = ("autograd_inplace",)
    breaks = {"autograd_inplace": ("gradient_recomputes",)}

    def forward_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        loss = super().forward_loss(x, y)
        x.data.mul_(0.5).add_(0.5)  # "outside autograd"
        return loss


# --- grad_checkpointing --------------------------------------------------------------------------
class ReentrantClassifier(ImageClassifier):
    def extract_features(self, x: torch.Tensor) -> torch.Tensor:
        if self.recompute_features and self.training:
            return torch.utils.checkpoint.checkpoint(self.features, x, use_reentrant=True)
        return self.features(x)


class ReentrantCheckpoint(PythonReference):
    """checkpointing with use_reentrant=True: the layers inside get no gradient when the input needs none"""

    name = "py_reentrant_checkpoint"
    must_be_caught_by = ("grad_checkpointing",)
    breaks = {"grad_checkpointing": ("gradients_equal",)}

    def make_model(self) -> nn.Module:
        model = ReentrantClassifier(CLASSES, IMAGE_SIZE, DROPOUT, CHANNELS)
        model.apply(init_weights)
        return model


class IgnoresCheckpointing(PythonReference):
    """activation_checkpointing is accepted and has no effect: the forward never recomputes"""

    name = "py_ignores_checkpointing"
    must_be_caught_by = ("grad_checkpointing",)
    breaks = {"grad_checkpointing": ("activation_memory_lower",)}

    def setup(self, options: torchconform.RunOptions) -> None:
        super().setup(options)
        self.model.recompute_features = False  # the option read, never applied


# --- step_hygiene ("Clip between backward and step"; "Zero the gradients every step") -------------
class ClipAfterStep(PythonReference):
    """gradients are clipped after optimizer.step(): the update used the unclipped gradient"""

    name = "py_clip_after_step"
    must_be_caught_by = ("step_hygiene",)
    breaks = {"step_hygiene": ("clip_between_backward_and_step",)}

    def optimisation_step(self, loss: torch.Tensor) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.after_backward(self._step_parameters)
        self.scaler.unscale_(self.optimizer)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        torch.nn.utils.clip_grad_norm_(self.step_parameters(), max_norm=CLIP_NORM)  # Fail: after the step


class NoZeroGrad(PythonReference):
    """gradients are never cleared: each step's gradient adds to all the previous ones"""

    name = "py_no_zero_grad"
    must_be_caught_by = ("step_hygiene",)
    breaks = {"step_hygiene": ("fresh_gradients",)}

    def optimisation_step(self, loss: torch.Tensor) -> None:
        self.scaler.scale(loss).backward()  # Fail: no zero_grad: this gradient adds to the last ones
        self.after_backward(self._step_parameters)
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.step_parameters(), max_norm=CLIP_NORM)
        self.scaler.step(self.optimizer)
        self.scaler.update()


# --- registration ("Build layers in __init__, never in forward") ----------------------------------
class LayerInForwardClassifier(ImageClassifier):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.extract_features(x).flatten(start_dim=1)
        head = nn.Linear(x.size(1), CLASSES).to(x.device)  # Fail: new weights on every call
        return head(x)


class LayerInForward(PythonReference):
    """the classifier's Linear is built inside forward(): unregistered, unoptimised, unsaved"""

    name = "py_layer_in_forward"
    must_be_caught_by = ("registration",)
    breaks = {"registration": ("parameters_registered", "eval_forwards_agree", "state_dict_round_trip")}

    def make_model(self) -> nn.Module:
        model = LayerInForwardClassifier(CLASSES, IMAGE_SIZE, DROPOUT, CHANNELS)
        model.apply(init_weights)
        return model


# --- checkpoint_safety ("Checkpoint the whole training state"; weights_only=True) -----------------
class SavesModelObject(PythonReference):
    """torch.save of the module object (the seeds' torch.save(model)), not its state_dict()"""

    name = "py_saves_model_object"
    must_be_caught_by = ("checkpoint_safety",)
    breaks = {"checkpoint_safety": ("strict_bare_load",)}

    def checkpoint_state(self) -> Dict[str, object]:
        state = super().checkpoint_state()
        del state["model_state_dict"]
        state["model"] = self.model  # Fail: pickles the class, not the state
        return state

    @staticmethod
    def digest(state: Dict[str, object]) -> str:
        # A module object does not serialise to the same bytes after a round trip: its weights do.
        return state_digest({**state, "model": state["model"].state_dict()})

    def write_checkpoint(self, state: Dict[str, object], path: str) -> None:
        tmp = path + ".tmp"
        torch.save({**state, INTEGRITY_KEY: self.digest(state)}, tmp)
        os.replace(tmp, path)

    def read_checkpoint(self, path: str) -> Dict[str, object]:
        # What users do when weights_only=True refuses the module: allow its classes, one by one.
        torch.serialization.add_safe_globals([
            ImageClassifier, nn.Sequential, nn.Conv2d, nn.BatchNorm2d, nn.ReLU, nn.MaxPool2d, nn.Dropout,
            nn.Linear, torch.nn.parameter.Parameter, set])
        state = torch.load(path, map_location="cpu", weights_only=True)
        if state.pop(INTEGRITY_KEY, None) != self.digest(state):
            raise ValueError(f"{path}: the checkpoint's content does not match its sha256: corrupted")
        return state

    def restore(self, state: Dict[str, object]) -> None:
        state = dict(state)
        state["model_state_dict"] = state.pop("model").state_dict()
        super().restore(state)


class LoadsWithoutWeightsOnly(PythonReference):
    """torch.load(path, weights_only=False): a checkpoint's pickle may run any code"""

    name = "py_loads_without_weights_only"
    must_be_caught_by = ("checkpoint_safety",)
    breaks = {"checkpoint_safety": ("malicious_pickle_rejected",)}

    def read_checkpoint(self, path: str) -> Dict[str, object]:
        state = torch.load(path, map_location="cpu", weights_only=False)  # Fail
        if not isinstance(state, dict) or state.pop(INTEGRITY_KEY, None) != state_digest(state):
            raise ValueError(f"{path}: the checkpoint's content does not match its sha256: corrupted")
        return state


class NonAtomicSave(PythonReference):
    """torch.save straight over the previous checkpoint: a crash mid-write leaves a torn file"""

    name = "py_non_atomic_save"
    must_be_caught_by = ("checkpoint_safety",)
    breaks = {"checkpoint_safety": ("atomic_save",)}

    def write_checkpoint(self, state: Dict[str, object], path: str) -> None:
        torch.save({**state, INTEGRITY_KEY: state_digest(state)}, path)  # Fail: in place


# --- torch_compile ("torch.compile adds a one-off warmup and then removes Python overhead") -------
# Each compiles the way the reference does (``torch.compile(model)`` on RunOptions.compile) and gets
# one thing wrong that users report. (Calling ``torch.compile(model)`` inside the loop is no variant
# here: with torch 2.15 a new wrapper with the default backend reuses the cached graph, measured: no
# recompilation.)
class PartialLastBatchSampler(__import__("reference").SeededBatchSampler):
    """The reference's batches with ``drop_last=False``: the epoch's last batch holds what is left."""

    def __len__(self) -> int:
        return -(-self.dataset_size // self.batch_size)


PARTIAL_BATCH = 20  # 96 samples: 4 batches of 20 and a last one of 16


class CompiledPartialLastBatch(PythonReference):
    """drop_last=False with a batch size that does not divide the data: the last batch of each epoch
    (16 of 20) fails the compiled graph's shape guard and recompiles"""

    name = "py_compiled_partial_last_batch"
    must_be_caught_by = ("torch_compile",)
    breaks = {"torch_compile": ("warmup_one_off",)}

    def make_loader(self):
        self.sampler_generator = torch.Generator().manual_seed(self.options.seed)
        self.loader_generator = torch.Generator().manual_seed(self.options.seed)
        self.sampler = PartialLastBatchSampler(len(self.train_set), PARTIAL_BATCH, self.sampler_generator)
        return self.build_loader(self.train_set, self.sampler, self.loader_generator)

    def steps_per_epoch(self) -> int:
        return len(self.sampler)


class ItemInForwardClassifier(ImageClassifier):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.extract_features(x)
        self.feature_norm = x.norm().item()  # Fail: a Python float for monitoring, in forward
        x = x.flatten(start_dim=1)
        return self.classifier(x)


class ItemInForward(PythonReference):
    """forward() reads a statistic with .item() for monitoring: the graph breaks there, and the float
    it hands to the resumed frame is specialised into its guards, so a new value recompiles"""

    name = "py_item_in_forward"
    must_be_caught_by = ("torch_compile",)
    breaks = {"torch_compile": ("no_graph_breaks", "warmup_one_off")}

    def make_model(self) -> nn.Module:
        model = ItemInForwardClassifier(CLASSES, IMAGE_SIZE, DROPOUT, CHANNELS)
        model.apply(init_weights)
        return model


class NanCheckClassifier(ImageClassifier):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.extract_features(x)
        if torch.isnan(x).any():  # Fail: a branch on a tensor's value, in forward
            raise FloatingPointError("NaN in the features")
        x = x.flatten(start_dim=1)
        return self.classifier(x)


class NanCheckInForward(PythonReference):
    """forward() checks its activations for NaN with an `if` on a tensor: data-dependent control flow
    breaks the graph there, every step"""

    name = "py_nan_check_in_forward"
    must_be_caught_by = ("torch_compile",)
    breaks = {"torch_compile": ("no_graph_breaks",)}

    def make_model(self) -> nn.Module:
        model = NanCheckClassifier(CLASSES, IMAGE_SIZE, DROPOUT, CHANNELS)
        model.apply(init_weights)
        return model


# --- checkpoint_safety: a compiled model's state dict ----------------------------------------------
class CompiledStateDict(PythonReference):
    """model = torch.compile(model) and then torch.save(model.state_dict()): every key carries the
    wrapper's `_orig_mod.` prefix, which a bare model refuses (the run's own compiled model loads it)"""

    name = "py_compiled_state_dict"
    must_be_caught_by = ("checkpoint_safety",)
    breaks = {"checkpoint_safety": ("strict_bare_load",)}

    def compile_model(self, model: nn.Module) -> nn.Module:
        torch._inductor.config.fallback_random = self.options.deterministic
        return torch.compile(model)  # compiled always, as the script ships it

    def checkpoint_state(self) -> Dict[str, object]:
        return {**super().checkpoint_state(), "model_state_dict": self.train_model.state_dict()}  # Fail

    def restore(self, state: Dict[str, object]) -> None:
        self.train_model.load_state_dict(state["model_state_dict"])  # the compiled module takes its own keys
        super().restore({**state, "model_state_dict": self.model.state_dict()})


# --- fsdp: the mistakes of sharded data-parallel training (FSDP2's fully_shard) ---------------------
class FsdpOptimizerBeforeShard(PythonReference):
    """the optimizer made before fully_shard: it keeps the unsharded parameters, which no longer
    train (fully_shard replaced them with sharded ones), and every rank holds them whole; the model
    never changes, and its optimizer state cannot be saved (get_optimizer_state_dict finds no
    parameter of the model in the optimizer: KeyError)"""

    name = "py_fsdp_optimizer_before_shard"
    must_be_caught_by = ("fsdp",)
    breaks = {"fsdp": ("matches_ddp", "shards_one_over_n", "checkpoint_loads_bare")}

    def build_training(self, model: nn.Module):
        optimizer = self.make_optimizer(model.parameters())  # Fail: made from the model before it is sharded
        return self.compile_model(self.parallelize(model)), optimizer


class FsdpRootUnsharded(PythonReference):
    """fully_shard on the blocks that look heavy (the features) but not on the root: the parameters
    outside a sharded block (the classifier) stay whole on every rank and nothing averages their
    gradients; the step's clip_grad_norm_ then meets plain and sharded gradients together and
    raises (torch 2.15: "aten._foreach_norm.Scalar got mixed torch.Tensor and DTensor")"""

    name = "py_fsdp_root_unsharded"
    must_be_caught_by = ("fsdp",)
    breaks = {"fsdp": ("matches_ddp", "shards_one_over_n")}

    def parallelize(self, model: nn.Module) -> nn.Module:
        if self.options.data_parallel != "fsdp":
            return super().parallelize(model)
        from torch.distributed.fsdp import fully_shard  # where it is used, as the reference's parallelize
        fully_shard(model.features)  # Fail: no fully_shard(model) (nor of the classifier)
        return model


class FsdpEveryRankSavesShard(PythonReference):
    """every rank saves its own shard of the model to the one checkpoint path, as if it were the
    whole state: the file is written once per rank, and what is left is one rank's half"""

    name = "py_fsdp_every_rank_saves_shard"
    must_be_caught_by = ("fsdp",)
    breaks = {"fsdp": ("rank0_writes", "checkpoint_loads_bare", "resume_bitwise")}

    def model_and_optimizer_state(self):
        if self.options.data_parallel != "fsdp":
            return super().model_and_optimizer_state()
        local = {k: v.to_local() if hasattr(v, "to_local") else v for k, v in self.model.state_dict().items()}
        return local, self.optimizer.state_dict()  # Fail: this rank's shards, not the whole state

    def writes_checkpoints(self) -> bool:
        return True  # Fail: no `if rank == 0`


class FsdpShardedStateDict(PythonReference):
    """rank 0 saves model.state_dict() of the sharded model as the checkpoint: its tensors are
    DTensors (each rank's shard and the layout), which a bare, unsharded model cannot load"""

    name = "py_fsdp_sharded_state_dict"
    must_be_caught_by = ("fsdp",)
    breaks = {"fsdp": ("checkpoint_loads_bare", "resume_bitwise")}

    def model_and_optimizer_state(self):
        return self.model.state_dict(), self.optimizer.state_dict()  # Fail: sharded under fully_shard


# --- amp ("Reach for mixed precision": torch.amp.autocast with a GradScaler, never a manual .half()) -
class HalfModel(PythonReference):
    """the model and its inputs cast to the low-precision dtype by hand (the seeds' Fail:
    ``model = model.half()``), no autocast and no scaler: the weights themselves are fp16"""

    name = "py_half_model"
    must_be_caught_by = ("amp",)
    breaks = {"amp": ("fp32_master_weights", "underflow", "scaler_accounting")}

    def setup(self, options: torchconform.RunOptions) -> None:
        super().setup(options)
        if self.amp.enabled:
            self.model.to(self.amp.torch_dtype)  # Fail: model = model.half()
            self.scaler = torch.amp.GradScaler(self.device.type, enabled=False)  # no scaler either

    def amp_forward(self, loss_of) -> torch.Tensor:
        loss = loss_of()  # no autocast: the weights are already low precision
        return loss if self.amp.loss_weight == 1.0 else loss * self.amp.loss_weight

    def forward_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.amp_forward(lambda: F.cross_entropy(self.train_model(x.to(self.amp.torch_dtype)), y))


class StepsPastTheScaler(PythonReference):
    """``optimizer.step()`` where ``scaler.step(optimizer)`` belongs (the GradScaler added to a loop
    whose step line stayed): the gradients are unscaled and clipped, the scale backs off after an
    inf, but the step with the inf is taken, and the parameters go non-finite"""

    name = "py_steps_past_the_scaler"
    must_be_caught_by = ("amp",)
    breaks = {"amp": ("scaler_accounting",)}

    def optimisation_step(self, loss: torch.Tensor) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.after_backward(self._step_parameters)
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.step_parameters(), max_norm=CLIP_NORM)
        self.optimizer.step()  # Fail: not scaler.step(optimizer), which skips a step with an inf
        self.scaler.update()


class ClipBeforeUnscale(PythonReference):
    """``clip_grad_norm_`` on the scaled gradients, ``unscale_`` left to ``scaler.step``: the clip
    threshold is compared with gradients 65536 times too large, so every step is clipped to
    max_norm / scale"""

    name = "py_clip_before_unscale"
    must_be_caught_by = ("amp",)
    breaks = {"amp": ("clip_after_unscale", "parity")}

    def optimisation_step(self, loss: torch.Tensor) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.after_backward(self._step_parameters)
        torch.nn.utils.clip_grad_norm_(self.step_parameters(), max_norm=CLIP_NORM)  # Fail: still scaled
        self.scaler.step(self.optimizer)  # unscales, then steps
        self.scaler.update()


class AutocastFixedDtype(PythonReference):
    """``torch.autocast(device, dtype=torch.float16)`` written once and kept: asked for bf16, the
    step's matmuls run in fp16 (without the scaler fp16 needs)"""

    name = "py_autocast_fixed_dtype"
    must_be_caught_by = ("amp",)
    breaks = {"amp": ("engagement",)}

    def amp_forward(self, loss_of) -> torch.Tensor:
        with torch.autocast(self.device.type, dtype=torch.float16, enabled=self.amp.enabled):  # Fail: fixed
            loss = loss_of()
        return loss if self.amp.loss_weight == 1.0 else loss * self.amp.loss_weight


class NoScalerState(_LeavesOut):
    """the checkpoint leaves out scaler.state_dict(): with fp16 the resumed run starts over at the
    initial scale"""

    name = "py_no_scaler_state"
    must_be_caught_by = ("resume_equality",)
    breaks = {"resume_equality": ("resume_bitwise_amp",)}
    left_out = "scaler_state_dict"


# --- distributed (the seeds' DDP code, ddp_reference.py, with one practice broken) -----------------


class _NoSetEpochDdp(PythonDdpReference):
    def begin_epoch(self) -> None:
        pass  # Fail: the epoch loop never calls sampler.set_epoch(epoch)


class DdpNoSetEpoch(PythonReference):
    """the DDP loop never calls sampler.set_epoch(epoch): every epoch sees epoch 0's order"""

    name = "py_ddp_no_set_epoch"
    must_be_caught_by = ("distributed",)
    breaks = {"distributed": ("sampler",)}

    def make_distributed(self) -> torchconform.Run:
        return _NoSetEpochDdp()


class _EveryRankSavesDdp(PythonDdpReference):
    def writes_files(self) -> bool:
        return True  # Fail: torch.save(...) with no `if dist.get_rank() == 0`


class DdpEveryRankSaves(PythonReference):
    """every rank saves the checkpoint (no `if dist.get_rank() == 0`): the ranks overwrite each other's file"""

    name = "py_ddp_every_rank_saves"
    must_be_caught_by = ("distributed",)
    breaks = {"distributed": ("rank0_writes",)}

    def make_distributed(self) -> torchconform.Run:
        return _EveryRankSavesDdp()


class _SavesWrappedDdp(PythonDdpReference):
    def model_state(self) -> Dict[str, torch.Tensor]:
        return self.train_model.state_dict()  # Fail: the DDP wrapper's keys ("module.conv.weight")

    def load_checkpoint(self, path: str) -> None:
        state = torch.load(path, map_location="cpu", weights_only=True)
        self.train_model.load_state_dict(state["model_state_dict"])  # resumes: it loads its own keys back
        self.optimizer.load_state_dict(state["optimizer_state_dict"])
        self.scheduler.load_state_dict(state["scheduler_state_dict"])
        self.epoch, self.position, self.step = int(state["epoch"]), int(state["position"]), int(state["step"])
        torch.set_rng_state(state["rng"])
        self.batches = None


class DdpSavesWrapped(PythonReference):
    """saves model.state_dict() of the DDP wrapper, not model.module's: the checkpoint's keys start with
    'module.' and do not load into the bare model"""

    name = "py_ddp_saves_wrapped"
    must_be_caught_by = ("distributed",)
    breaks = {"distributed": ("checkpoint_loads_unwrapped",)}

    def make_distributed(self) -> torchconform.Run:
        return _SavesWrappedDdp()


class _SumsGradientsDdp(PythonDdpReference):
    def wrap(self, model: nn.Module) -> nn.Module:
        return model  # no DistributedDataParallel: the gradients are all-reduced by hand below

    def average_gradients(self) -> None:
        if self.parallel:
            for p in self.model.parameters():
                dist.all_reduce(p.grad)  # Fail: the sum over the ranks, never divided by the world size


class DdpSumsGradients(PythonReference):
    """all-reduces the gradients by hand and forgets to divide by the world size: each update is N times too large"""

    name = "py_ddp_sums_gradients"
    must_be_caught_by = ("distributed",)
    breaks = {"distributed": ("ddp_gradients",)}

    def make_distributed(self) -> torchconform.Run:
        return _SumsGradientsDdp()


class _NoBarrierDdp(PythonDdpReference):
    def after_write(self) -> None:
        pass  # Fail: rank 0 saves and the other ranks go on without waiting for the file


class DdpNoBarrier(PythonReference):
    """no dist.barrier() after rank 0 saves: the other ranks read before the checkpoint is in place"""

    name = "py_ddp_no_barrier"
    must_be_caught_by = ("distributed",)
    breaks = {"distributed": ("checkpoint_loads_unwrapped",)}

    def make_distributed(self) -> torchconform.Run:
        return _NoBarrierDdp()
