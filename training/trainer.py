"""The timed training loop, shared by both frameworks, and its TensorFlow backend.

The loop (deadline, signals, time-based checkpoints, training.csv and training.json, StepClock) is
framework-neutral; a backend session builds the model, optimizer and input pipeline and runs one
step: `TrainingSession` below wraps Model Garden's MaskRCNNTask.train_step (`--framework tf`),
training.torch_backend.TorchSession a torchvision Faster R-CNN (`--framework torch`, no TensorFlow).
A session's step() returns its values still on the device; the loop reads them (resolve) every step
on a CPU and every LOSS_READ_EVERY_GPU steps on a GPU, so the host does not wait for the device each
step; every step still gets its row in training.csv.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runformat import CHECKPOINTS_DIR, format_duration
from training.console import write_raw
from training.dataset import dataset_info
from training.device import DeviceInfo
from training.experiment import PRESETS, build_config
from training.runlog import LOSS_COLUMNS, Phase, TrainingCsv, write_training_json

MAX_CHECKPOINTS = 3
DEFAULT_WARMUP_EXCLUDED = 20
LOSS_READ_EVERY_GPU = 10
BUDGET_NOTE = (
    "the budget and elapsed_s count from the first call of the training step, graph tracing "
    "included; importing the framework and building the model and input pipeline (setup_s) come before"
)


@dataclass(frozen=True)
class TrainOptions:
    run_dir: Path
    dataset: Path
    device: str = "cpu"
    duration_s: float = 600.0
    preset: str = "small"
    batch_size: int = 2
    precision: str = "float32"
    init_checkpoint: str | None = None
    max_steps: int | None = None
    checkpoint_every_s: float = 60.0
    seed: int = 0
    progress_every_s: float = 10.0
    framework: str = "tf"
    read_losses_every: int | None = None  # None: every step on a CPU, LOSS_READ_EVERY_GPU on a GPU

    def loss_read_interval(self) -> int:
        if self.read_losses_every is not None:
            return self.read_losses_every
        return 1 if self.device == "cpu" else LOSS_READ_EVERY_GPU


SAME_STOP_WINDOW_S = 1.0  # a second signal later than this after the first: the user insists


@dataclass
class StopRequest:
    """Set from a signal handler; the loop reads it between steps."""

    signum: int | None = None
    first_at: float = 0.0

    def install(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._handle)

    def _handle(self, signum: int, _frame: Any) -> None:
        # Raw writes: a buffered print here could re-enter a print the main thread is in the middle of.
        if self.signum is not None:
            if time.monotonic() - self.first_at < SAME_STOP_WINDOW_S:
                return  # a scheduler signals every process at once and the collector passes it on: one stop
            write_raw(2, "second signal: exiting without a final checkpoint\n")
            os._exit(128 + signum)
        self.signum = signum
        self.first_at = time.monotonic()
        name = signal.Signals(signum).name
        write_raw(1, f"{name}: finishing the current step, then a final checkpoint\n")


@dataclass
class StepClock:
    """Step end times of this session, for first-step and steady-state figures."""

    start_unix: float
    ends: list[float] = field(default_factory=list)

    def warmup_excluded(self) -> int:
        steps = len(self.ends)
        return DEFAULT_WARMUP_EXCLUDED if steps >= 3 * DEFAULT_WARMUP_EXCLUDED else max(1, steps // 3)

    def steady_steps_per_s(self) -> float | None:
        excluded = self.warmup_excluded()
        if len(self.ends) - excluded < 1:
            return None
        span = self.ends[-1] - self.ends[excluded - 1]
        return (len(self.ends) - excluded) / span if span > 0 else None

    def first_step_s(self) -> float | None:
        return self.ends[0] - self.start_unix if self.ends else None


@dataclass
class TrainResult:
    status: str
    global_step: int
    steps: int
    state: dict[str, Any]


def train(options: TrainOptions, device: DeviceInfo, stop: StopRequest, process_start: float) -> TrainResult:
    """Train until the deadline, max_steps or a signal; then a checkpoint (if a step ran), training.json."""
    run_dir = Path(options.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with Phase(run_dir, "train") as phase:
        state = _initial_state(options, device)
        try:
            result = _train(options, device, stop, process_start, state)
        except BaseException as exc:
            phase.ok = False
            state.update(status="failed", error=_one_line(exc), end_unix=time.time())
            write_training_json(run_dir, state)
            raise
    return result


def _train(
    options: TrainOptions, device: DeviceInfo, stop: StopRequest, process_start: float, state: dict[str, Any]
) -> TrainResult:
    run_dir = Path(options.run_dir)
    session = _open_session(options, device, state)
    initial_step = session.restore_or_initialize(run_dir / CHECKPOINTS_DIR)
    state.update(
        initial_step=initial_step,
        global_step=initial_step,
        last_checkpoint=session.restored_from,
        setup_s=round(time.time() - process_start, 3),
    )
    if session.restored_from:
        state["resumed_from"] = session.restored_from
        print(f"resuming from {session.restored_from} (step {initial_step})", flush=True)

    clock = StepClock(start_unix=time.time())
    state.update(start_unix=clock.start_unix, status="running")
    write_training_json(run_dir, state)
    log = TrainingCsv(run_dir)
    try:
        status = run_loop(options, session, clock, stop, log, state)
    except BaseException:
        with contextlib.suppress(Exception):  # training.json of a failed run keeps its steps
            _update_figures(state, clock, session, options)
        raise
    finally:
        log.close()
    _update_figures(state, clock, session, options)  # in case the final checkpoint fails
    if clock.ends:
        state["last_checkpoint"] = session.save() or state.get("last_checkpoint")
    _update_figures(state, clock, session, options)
    state.update(status=status, end_unix=time.time())
    write_training_json(run_dir, state)
    steady = state["steady_steps_per_s"]
    print(
        f"training {status}: {state['steps']} steps (global step {state['global_step']}), "
        f"steady {steady:.3f} steps/s"
        if steady
        else f"training {status}: {state['steps']} steps",
        flush=True,
    )
    return TrainResult(status, state["global_step"], state["steps"], state)


def _open_session(options: TrainOptions, device: DeviceInfo, state: dict[str, Any]):
    if options.framework == "torch":
        from training.torch_backend import TorchSession

        torch_session = TorchSession(options, device.kind)
        state["config"] = torch_session.config
        return torch_session
    import tensorflow as tf
    from official.modeling import performance

    params = build_config(
        preset=options.preset,
        dataset=options.dataset,
        batch_size=options.batch_size,
        precision=options.precision,
        seed=options.seed,
        init_checkpoint=options.init_checkpoint,
        num_gpus=1 if device.kind == "gpu" else 0,
    )
    state["config"] = params.as_dict()
    performance.set_mixed_precision_policy(params.runtime.mixed_precision_dtype)
    tf.random.set_seed(options.seed)
    return TrainingSession(params, device)


def run_loop(
    options: TrainOptions,
    session: TrainingSession,
    clock: StepClock,
    stop: StopRequest,
    log: TrainingCsv,
    state: dict[str, Any],
) -> str:
    deadline = clock.start_unix + options.duration_s
    last_checkpoint = last_progress = clock.start_unix
    progress_steps = 0
    read_every = options.loss_read_interval()
    first_step = session.global_step() - len(clock.ends)
    pending: list[tuple[float, float, int, Any]] = []  # (start, end, step, device values) not yet logged

    def write_pending() -> dict[str, float]:
        resolved = session.resolve([raw for *_, raw in pending])
        # The host waited for the device here: the last step really ended now.
        started, _, step, raw = pending[-1]
        pending[-1] = (started, time.time(), step, raw)
        clock.ends[-1] = pending[-1][1]
        for (started, ended, step, _), values in zip(pending, resolved, strict=True):
            log.write(
                time_unix=ended,
                elapsed_s=ended - clock.start_unix,
                step=step,
                losses=values,
                learning_rate=values["learning_rate"],
                step_time_s=ended - started,
                batch_size=options.batch_size,
            )
        pending.clear()
        return resolved[-1]

    try:
        while True:
            if stop.signum is not None:
                return "interrupted"
            if options.max_steps is not None and len(clock.ends) >= options.max_steps:
                return "completed"
            if time.time() >= deadline:
                return "deadline"
            started = time.time()
            raw = session.step()
            ended = time.time()
            clock.ends.append(ended)
            pending.append((started, ended, first_step + len(clock.ends), raw))
            due_progress = ended - last_progress >= options.progress_every_s or len(clock.ends) == 1
            due_checkpoint = ended - last_checkpoint >= options.checkpoint_every_s
            if not (due_progress or due_checkpoint or len(pending) >= read_every):
                continue
            values = write_pending()
            ended = clock.ends[-1]
            if due_progress:
                rate = (len(clock.ends) - progress_steps) / max(ended - last_progress, 1e-9)
                _print_progress(
                    first_step + len(clock.ends),
                    values["total_loss"],
                    rate,
                    ended - clock.start_unix,
                    options.duration_s,
                    first=len(clock.ends) == 1,
                )
                last_progress, progress_steps = ended, len(clock.ends)
            if due_checkpoint:
                state["last_checkpoint"] = session.save() or state.get("last_checkpoint")
                _update_figures(state, clock, session, options)
                write_training_json(options.run_dir, state)
                last_checkpoint = time.time()
    finally:
        if pending:
            write_pending()


def _print_progress(step: int, loss: float, rate: float, elapsed: float, budget: float, first: bool) -> None:
    what = "first step (graph tracing)" if first else f"{rate:.2f} steps/s"
    print(
        f"step {step}  loss {loss:.4f}  {what}  elapsed {format_duration(max(elapsed, 0.001))} "
        f"of {format_duration(budget)}",
        flush=True,
    )


def _update_figures(
    state: dict[str, Any], clock: StepClock, session: TrainingSession, options: TrainOptions
) -> None:
    steady = clock.steady_steps_per_s()
    state.update(
        steps=len(clock.ends),
        global_step=session.global_step(),
        first_step_s=_rounded(clock.first_step_s()),
        warmup_steps_excluded=clock.warmup_excluded() if clock.ends else 0,
        steady_steps_per_s=_rounded(steady),
        steady_examples_per_s=_rounded(steady * options.batch_size if steady else None),
    )


def _framework_fields(options: TrainOptions, device: DeviceInfo) -> dict[str, Any]:
    if options.framework == "torch":
        from training.torch_backend import torch_fields

        return torch_fields(device.kind)
    import tensorflow as tf

    return {
        "framework": "tensorflow",
        "framework_version": tf.__version__,
        "tensorflow_devices": device.tensorflow_devices,
        "tensorflow_version": tf.__version__,
    }


def _initial_state(options: TrainOptions, device: DeviceInfo) -> dict[str, Any]:
    preset = PRESETS[options.preset]
    return {
        "status": "running",
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "device_requested": options.device,
        "device_used": device.used,
        "gpu_names": device.gpu_names,
        "gpu_uuids": device.gpu_uuids,
        **_framework_fields(options, device),
        "preset": options.preset,
        "backbone": f"resnet{preset.backbone_depth}",
        "image_size": preset.image_size,
        "loss_read_every_steps": options.loss_read_interval(),
        "batch_size": options.batch_size,
        "precision": options.precision,
        "dataset": str(options.dataset),
        "dataset_info": _dataset_summary(options.dataset),
        "seed": options.seed,
        "duration_budget_s": options.duration_s,
        "max_steps": options.max_steps,
        "budget_note": BUDGET_NOTE,
        "start_unix": None,
        "end_unix": None,
        "setup_s": None,
        "first_step_s": None,
        "steps": 0,
        "initial_step": 0,
        "global_step": 0,
        "warmup_steps_excluded": 0,
        "steady_steps_per_s": None,
        "steady_examples_per_s": None,
        "last_checkpoint": None,
        "checkpoint_interval_s": options.checkpoint_every_s,
        "init_checkpoint": options.init_checkpoint,
    }


class TrainingSession:
    """Model Garden's task, model, optimizer and input pipeline on one device, with our checkpoints."""

    def __init__(self, params, device: DeviceInfo, strategy=None) -> None:
        import tensorflow as tf
        from official.core import task_factory
        from official.vision.tasks import maskrcnn  # noqa: F401  (registers the task)

        self.tf = tf
        self.params = params
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
        self._step_fn = self._build_step_fn()

    def restore_or_initialize(self, checkpoint_dir: Path) -> int:
        tf = self.tf
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, str(checkpoint_dir), max_to_keep=MAX_CHECKPOINTS, checkpoint_name="ckpt"
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

    def save(self) -> str | None:
        """Checkpoint at the current step; the run-relative path, or None if this step is already saved."""
        assert self.manager is not None
        path = self.manager.save(checkpoint_number=self.global_step())
        return f"{CHECKPOINTS_DIR}/{Path(path).name}" if path else None

    def step(self) -> dict[str, Any]:
        """The step's losses and learning rate as tensors (read later by resolve)."""
        return self._step_fn(self.iterator)

    def resolve(self, pending: list[dict[str, Any]]) -> list[dict[str, float]]:
        return [{name: float(value) for name, value in outputs.items()} for outputs in pending]

    def _build_step_fn(self):
        tf, task, model, optimizer, strategy = self.tf, self.task, self.model, self.optimizer, self.strategy

        def replica_step(inputs):
            captured: dict[str, Any] = {"learning_rate": _learning_rate(optimizer)}
            metrics = [_LossCapture(name, captured) for name in LOSS_COLUMNS]
            task.train_step(inputs, model, optimizer, metrics=metrics)
            return captured

        @tf.function
        def step_fn(iterator):
            return strategy.run(replica_step, args=(next(iterator),))

        return step_fn


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


def _dataset_summary(dataset: Path) -> dict[str, Any]:
    info = dataset_info(dataset)
    keys = ("kind", "generator_version", "seed", "image_size", "difficulty", "category", "classes")
    summary = {key: info[key] for key in keys if key in info}
    summary["images"] = {split: part.get("images") for split, part in info.get("splits", {}).items()}
    return summary


def _rounded(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:500]
