"""The TensorFlow backend of the timed loop: Model Garden's MaskRCNNTask.train_step on one device, or
on N GPUs under its mirrored strategy (`--gpus N`), with our checkpoints.

Same contract as training.torch_backend.TorchSession: restore_or_initialize, global_step, save, step,
resolve, close. Under the mirrored strategy each replica's losses are averaged before they leave the step.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from runformat import CHECKPOINTS_DIR
from runformat.diskfull import DiskFullError, disk_full_in
from training.device import DeviceInfo
from training.distributed import World
from training.experiment import build_config
from training.runlog import LOSS_COLUMNS

MAX_CHECKPOINTS = 3
# Input iterators of finished sessions, never destroyed: see TrainingSession.close.
_PARKED_ITERATORS: list[Any] = []


def open_tf_session(options, device: DeviceInfo, state: dict[str, Any]) -> TrainingSession:
    """Model Garden's config for `options` (one device, or mirrored over `options.replicas` GPUs)."""
    import tensorflow as tf
    from official.modeling import performance

    gpus = options.replicas if device.kind == "gpu" else 0
    params = build_config(
        preset=options.preset,
        dataset=options.dataset,
        batch_size=options.global_batch_size,
        precision=options.precision,
        seed=options.seed,
        init_checkpoint=options.init_checkpoint,
        num_gpus=gpus,
        distribution_strategy="mirrored" if gpus > 1 else "one_device",
    )
    state["config"] = params.as_dict()
    performance.set_mixed_precision_policy(params.runtime.mixed_precision_dtype)
    tf.random.set_seed(options.seed)
    strategy = None
    if gpus > 1:
        strategy = tf.distribute.MirroredStrategy(devices=[f"/gpu:{index}" for index in range(gpus)])
    return TrainingSession(
        params, device, strategy, keep_checkpoints=options.keep_checkpoints, jit_compile=options.compile
    )


class TrainingSession:
    """Model Garden's task, model, optimizer and input pipeline on one device, with our checkpoints."""

    def __init__(
        self,
        params,
        device: DeviceInfo,
        strategy=None,
        keep_checkpoints: int = MAX_CHECKPOINTS,
        jit_compile: bool = False,
    ) -> None:
        import tensorflow as tf
        from official.core import task_factory
        from official.vision.tasks import maskrcnn  # noqa: F401  (registers the task)

        self.tf = tf
        self.params = params
        self.keep_checkpoints = keep_checkpoints
        self.world = World()  # one process, whatever the number of replicas
        self.strategy = strategy or tf.distribute.OneDeviceStrategy(
            "/gpu:0" if device.kind == "gpu" else "/cpu:0"
        )
        with self.strategy.scope():
            self.task = task_factory.get_task(params.task)
            self.model = self.task.build_model()
            self.optimizer = self.task.create_optimizer(params.trainer.optimizer_config, params.runtime)
            self.checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer)
            dataset = self.strategy.distribute_datasets_from_function(
                lambda context: self.task.build_inputs(params.task.train_data, context)
            )
        self.iterator = iter(dataset)
        self.manager: tf.train.CheckpointManager | None = None
        self.restored_from: str | None = None
        self.jit_compile = jit_compile  # --compile: XLA compiles each replica's train step
        self._step_fn = self._build_step_fn()
        self.device_kind = device.kind
        self._traced_step = None  # the step's concrete function, once its first call traced it

    def restore_or_initialize(self, checkpoint_dir: Path) -> int:
        tf = self.tf
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, str(checkpoint_dir), max_to_keep=self.keep_checkpoints, checkpoint_name="ckpt"
        )
        latest = self.manager.latest_checkpoint
        if latest:
            self.checkpoint.restore(latest).assert_existing_objects_matched()
            self.restored_from = f"{CHECKPOINTS_DIR}/{Path(latest).name}"
        else:
            self.task.initialize(self.model)
        return self.global_step()

    def global_step(self) -> int:
        return int(self.optimizer.iterations.numpy())

    def close(self) -> None:
        """Done training: the input iterator is parked, not destroyed. TensorFlow 2.20's tf.data iterator
        destructor waits, idle, for its autotuning thread's next wake-up, up to 60 s after a long run (seen
        with gdb: ~RootDataset::Iterator waiting on Model::OptimizeLoop), which delayed export by that long.
        The process ends with os._exit (training.cli.run), so the parked iterator's few prefetched batches
        are all it costs."""
        if hasattr(self, "iterator"):
            _PARKED_ITERATORS.append(self.iterator)
            del self.iterator

    def save(self) -> str | None:
        """Checkpoint at the current step; the run-relative path, or None if this step is already saved.
        A save that fails leaves no part of itself behind; on a full disk it raises DiskFullError."""
        assert self.manager is not None
        step = self.global_step()
        prefix = Path(self.manager.directory) / f"ckpt-{step}"
        latest = self.manager.latest_checkpoint
        if latest and Path(latest).name == prefix.name:
            return None
        try:
            path = self.manager.save(checkpoint_number=step)
        except BaseException as exc:
            full = disk_full_in(exc)  # TensorFlow names its temporary file: the checkpoint is what failed
            _remove_checkpoint(prefix)
            if full is not None:
                raise DiskFullError(prefix, full.free_bytes) from exc
            raise
        return f"{CHECKPOINTS_DIR}/{Path(path).name}" if path else None

    def step(self) -> dict[str, Any]:
        """The step's losses and learning rate as tensors (read later by resolve)."""
        if self.jit_compile and self._traced_step is None:
            outputs = self._first_compiled_step()
        else:
            outputs = self._step_fn(self.iterator)
        if self._traced_step is None:  # the first call traced it: this only looks it up
            try:
                self._traced_step = self._step_fn.get_concrete_function(self.iterator)
            except Exception as exc:  # counting never stops a training: count_flops reports it
                self._traced_step = exc
        return outputs

    def _first_compiled_step(self) -> dict[str, Any]:
        """The first step traces and XLA-compiles the train step: a failure there other than out of
        memory is the compiler's (its error says `compile failed (XLA): ...`)."""
        from training.failures import CompileFailed, out_of_memory

        try:
            outputs = self._step_fn(self.iterator)
            self.tf.nest.map_structure(lambda value: value.numpy(), outputs)  # XLA's errors surface here
        except Exception as exc:
            if out_of_memory(exc) is not None or not isinstance(exc, self.tf.errors.OpError | ValueError):
                raise
            raise CompileFailed("XLA, jit_compile of the train step", exc) from exc
        return outputs

    # Counted from the graph the first step traced, after the loop: counting at the start would trace the
    # step there, taking the tracing out of the budget, which counts from the first step's call.
    flops_at_start = False

    def count_flops(self) -> dict[str, Any]:
        """training.json's `flops`, from the traced step's graph (traced here if no step ran yet)."""
        from training.flops import count_tf_step, guarded, tf_math_dtype

        def count() -> dict[str, Any]:
            if isinstance(self._traced_step, Exception):
                raise self._traced_step
            traced = self._traced_step or self._step_fn.get_concrete_function(self.iterator)
            batch = int(self.params.task.train_data.global_batch_size)
            return count_tf_step(traced, batch, tf_math_dtype(self.tf, self.device_kind))

        return guarded("TensorFlow", count)

    def resolve(self, pending: list[dict[str, Any]]) -> list[dict[str, float]]:
        return [{name: float(value) for name, value in outputs.items()} for outputs in pending]

    def _build_step_fn(self):
        tf, task, model, optimizer, strategy = self.tf, self.task, self.model, self.optimizer, self.strategy

        def replica_step(inputs):
            captured: dict[str, Any] = {"learning_rate": _learning_rate(optimizer)}
            metrics = [_LossCapture(name, captured) for name in LOSS_COLUMNS]
            task.train_step(inputs, model, optimizer, metrics=metrics)
            return captured

        if self.jit_compile:
            replica_step = tf.function(replica_step, jit_compile=True)
        mean = tf.distribute.ReduceOp.MEAN

        @tf.function
        def step_fn(iterator):
            outputs = strategy.run(replica_step, args=(next(iterator),))
            return {name: strategy.reduce(mean, value, axis=None) for name, value in outputs.items()}

        return step_fn


def _remove_checkpoint(prefix: Path) -> None:
    """The files of the checkpoint `prefix` (ckpt-N.index, ckpt-N.data-*) and its ckpt-N_temp directory."""
    for path in [*prefix.parent.glob(f"{prefix.name}.*"), *prefix.parent.glob(f"{prefix.name}_temp*")]:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


class _LossCapture:
    """Stands in for a Keras Mean metric in task.train_step: keeps the step's loss tensor itself."""

    def __init__(self, name: str, sink: dict[str, Any]) -> None:
        self.name, self._sink = name, sink

    def update_state(self, value) -> None:
        self._sink[self.name] = value


def _learning_rate(optimizer):
    import tensorflow as tf

    rate = getattr(optimizer, "inner_optimizer", optimizer).learning_rate
    if callable(rate):
        rate = rate(optimizer.iterations)
    return tf.cast(rate, tf.float32)
