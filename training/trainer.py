"""The timed training loop, shared by both frameworks, and its TensorFlow backend.

The loop (deadline, signals, time-based checkpoints, training.csv and training.json, StepClock) is
framework-neutral; a backend session builds the model, optimizer and input pipeline and runs one
step: training.tf_backend.TrainingSession wraps Model Garden's MaskRCNNTask.train_step (`--framework
tf`), training.torch_backend.TorchSession a torchvision Faster R-CNN (`--framework torch`, no
TensorFlow). Under torchrun (training.distributed) every rank runs this loop; rank 0 alone writes the
files and checkpoints, and the ranks agree on when to stop.
A session's step() returns its values still on the device; the loop reads them (resolve) every step
on a CPU and every LOSS_READ_EVERY_GPU steps on a GPU, so the host does not wait for the device each
step; every step still gets its row in training.csv.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runformat import CHECKPOINTS_DIR, format_duration
from runformat.diskfull import DiskFull, Reserve, disk_full_in
from training.console import write_raw
from training.device import DeviceInfo
from training.distributed import (
    COMPLETED,
    CONTINUE,
    DEADLINE,
    INTERRUPTED,
    STOP_NAMES,
    World,
    agree_stop,
    gather_from_all,
    share_from_main,
)
from training.errors import DiskFullStop
from training.runlog import Phase, TrainingCsv, write_training_json
from training.settings import apply_settings
from training.trainstate import failure_text, initial_state, update_figures

DEFAULT_WARMUP_EXCLUDED = 20
LOSS_READ_EVERY_GPU = 10
# Held in the run directory (runformat.diskfull.Reserve) until the final records: training.json (~12 kB
# with TensorFlow's config), the step rows still queued and phases.csv's row, even on a full disk.
TRAINING_RESERVE_BYTES = 256 * 1024


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
    keep_checkpoints: int = 3
    seed: int = 0
    progress_every_s: float = 10.0
    framework: str = "tf"
    read_losses_every: int | None = None  # None: every step on a CPU, LOSS_READ_EVERY_GPU on a GPU
    replicas: int = 1  # devices in parallel (torch: ranks; TF: mirrored GPUs); batch_size is per device
    nodes: dict[str, Any] | None = None  # many nodes: nnodes, node_rank, rdzv_endpoint, rdzv_id
    # The rest of the setting (runformat.tuning.Setting; training.settings applies it)
    tf32: bool | None = None  # None: the framework's default
    channels_last: bool = False
    compile: bool = False
    threads: int | None = None
    loader_workers: int = 0
    pin_memory: bool = False
    checkpoint: bool = True  # False: no checkpoint at all (a tuning trial)

    @property
    def global_batch_size(self) -> int:
        return self.batch_size * self.replicas

    def loss_read_interval(self) -> int:
        if self.read_losses_every is not None:
            return self.read_losses_every
        return 1 if self.device == "cpu" else LOSS_READ_EVERY_GPU


SAME_STOP_WINDOW_S = 1.0  # a second signal later than this after the first: the user insists


@dataclass
class StopRequest:
    """Set from a signal handler; the loop reads it between steps."""

    signum: int | None = None
    # Under torchrun a stop reaches a rank twice (its process group's signal, then the launcher's
    # forwarded one): a repeat this soon after the first is the same request, not insistence.
    same_request_within_s: float = SAME_STOP_WINDOW_S
    first_at: float = 0.0

    def install(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._handle)

    def _handle(self, signum: int, _frame: Any) -> None:
        # Raw writes: a buffered print here could re-enter a print the main thread is in the middle of.
        if self.signum is not None and time.monotonic() - self.first_at < self.same_request_within_s:
            return  # a scheduler signals every process at once and the collector passes it on: one stop
        if self.signum is not None:  # a second signal: the user insists
            write_raw(2, "second signal: exiting without a final checkpoint\n")
            os._exit(128 + signum)
        self.signum, self.first_at = signum, time.monotonic()
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


def train(
    options: TrainOptions,
    device: DeviceInfo,
    stop: StopRequest,
    process_start: float,
    world: World | None = None,
) -> TrainResult:
    """Train until the deadline, max_steps or a signal; then a checkpoint (if a step ran), training.json.
    With several ranks, only rank 0 (world.is_main) writes anything into the run directory."""
    world = world or World()
    run_dir = Path(options.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    apply_settings(options)
    state = initial_state(options, device, world)
    if not world.is_main:
        return _train(options, device, stop, process_start, state, world)
    reserve = Reserve.create(run_dir, "training", TRAINING_RESERVE_BYTES)
    try:
        with Phase(run_dir, "train") as phase:
            try:
                result = _train(options, device, stop, process_start, state, world, reserve)
            except BaseException as exc:
                phase.ok = False
                reserve.release()
                state.update(status="failed", error=failure_text(exc, world), end_unix=time.time())
                full = disk_full_in(exc)
                if full is None:
                    write_training_json(run_dir, state)
                    raise
                raise DiskFullStop(_record_disk_full(run_dir, state, full)) from exc
    finally:
        reserve.release()
    return result


def _record_disk_full(run_dir: Path, state: dict[str, Any], full: DiskFull) -> str:
    """training.json of a training stopped by a full disk; the one line that says so."""
    state.update(error=full.line(), failure=full.record("training", run_dir))
    line = f"{full.line()}; stopped at step {state.get('global_step')}"
    kept = state.get("last_checkpoint")
    line += f", the last good checkpoint is {kept}" if kept else ", before its first checkpoint"
    try:
        write_training_json(run_dir, state)
    except OSError as exc:
        line += f"; training.json not updated either ({exc.strerror or exc})"
    return line


def _train(
    options: TrainOptions,
    device: DeviceInfo,
    stop: StopRequest,
    process_start: float,
    state: dict[str, Any],
    world: World,
    reserve: Reserve | None = None,
) -> TrainResult:
    run_dir = Path(options.run_dir)
    main = world.is_main
    session = _open_session(options, device, state, world)
    initial_step = session.restore_or_initialize(run_dir / CHECKPOINTS_DIR)
    if main:
        _record_flops(session, state, at_start=True)
    state.update(
        initial_step=initial_step,
        global_step=initial_step,
        last_checkpoint=session.restored_from,
        setup_s=round(time.time() - process_start, 3),
    )
    if session.restored_from and main:
        state["resumed_from"] = session.restored_from
        print(f"resuming from {session.restored_from} (step {initial_step})", flush=True)

    clock = StepClock(start_unix=share_from_main(world, time.time()))
    state.update(start_unix=clock.start_unix, status="running")
    if main:
        write_training_json(run_dir, state)
    log = TrainingCsv(run_dir) if main else None
    try:
        status = run_loop(options, session, clock, stop, log, state)
    except BaseException as exc:
        if reserve is not None and disk_full_in(exc) is not None:
            reserve.release()  # room for the step rows still queued, and the final records
        with contextlib.suppress(Exception):  # training.json of a failed run keeps its steps
            update_figures(state, clock, session, options)
        session.close()
        if log is not None:
            log.close(quiet=True)
        raise
    session.close()  # the input pipeline is done with, however the loop ended
    if log is not None:
        log.close()
    update_figures(state, clock, session, options)  # in case the final checkpoint fails
    if main and clock.ends:
        _record_flops(session, state, at_start=False)
    if world.distributed and hasattr(session, "weights_digest"):
        digests = gather_from_all(world, session.weights_digest())
        state.update(replica_weight_digests=digests, replicas_in_sync=len(set(digests)) == 1)
    if clock.ends and main and options.checkpoint:
        state["last_checkpoint"] = session.save() or state.get("last_checkpoint")
    update_figures(state, clock, session, options)
    state.update(status=status, end_unix=time.time())
    if not main:
        return TrainResult(status, state["global_step"], state["steps"], state)
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


def _open_session(options: TrainOptions, device: DeviceInfo, state: dict[str, Any], world: World):
    if options.framework == "torch":
        from training.torch_backend import TorchSession

        torch_session = TorchSession(options, device.kind, world)
        state["config"] = torch_session.config
        return torch_session
    from training.tf_backend import open_tf_session

    return open_tf_session(options, device, state)


def _record_flops(session, state: dict[str, Any], at_start: bool) -> None:
    """FLOPs per training example, counted once (training.flops), before the first step or after the
    last as the session says; a count that fails is recorded as such and the training goes on."""
    if getattr(session, "flops_at_start", None) is at_start:
        state["flops"] = session.count_flops()


def _stop_wish(options: TrainOptions, clock: StepClock, stop: StopRequest, deadline: float) -> int:
    if stop.signum is not None:
        return INTERRUPTED
    if options.max_steps is not None and len(clock.ends) >= options.max_steps:
        return COMPLETED
    if time.time() >= deadline:
        return DEADLINE
    return CONTINUE


def run_loop(
    options: TrainOptions,
    session,
    clock: StepClock,
    stop: StopRequest,
    log: TrainingCsv | None,
    state: dict[str, Any],
) -> str:
    """Steps until a stop; `log` None on ranks other than 0 (they neither write nor checkpoint)."""
    world: World = getattr(session, "world", World())
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
            if log is not None:
                log.add(
                    time_unix=ended,
                    elapsed_s=ended - clock.start_unix,
                    step=step,
                    losses=values,
                    learning_rate=values["learning_rate"],
                    step_time_s=ended - started,
                    batch_size=options.global_batch_size,
                )
        pending.clear()  # handed over: a row the disk has no room for stays queued in the log
        if log is not None:
            log.flush()
        return resolved[-1]

    try:
        while True:
            wish = _stop_wish(options, clock, stop, deadline)
            # Ranks agree before each step (every read_every steps on a GPU, to keep the host ahead).
            if world.distributed and (wish != CONTINUE or len(clock.ends) % read_every == 0):
                wish = agree_stop(world, wish, getattr(session, "device", None))
            if wish != CONTINUE:
                break
            started = time.time()
            raw = session.step()
            ended = time.time()
            clock.ends.append(ended)
            pending.append((started, ended, first_step + len(clock.ends), raw))
            due_progress = ended - last_progress >= options.progress_every_s or len(clock.ends) == 1
            due_checkpoint = (
                options.checkpoint
                and ended - last_checkpoint >= options.checkpoint_every_s
                and log is not None
            )
            if not (due_progress or due_checkpoint or len(pending) >= read_every):
                continue
            values = write_pending()
            ended = clock.ends[-1]
            if due_progress and log is not None:
                rate = (len(clock.ends) - progress_steps) / max(ended - last_progress, 1e-9)
                _print_progress(
                    first_step + len(clock.ends),
                    values["total_loss"],
                    rate,
                    ended - clock.start_unix,
                    options.duration_s,
                    first=len(clock.ends) == 1,
                )
            if due_progress:
                last_progress, progress_steps = ended, len(clock.ends)
            if due_checkpoint:
                state["last_checkpoint"] = session.save() or state.get("last_checkpoint")
                update_figures(state, clock, session, options)
                write_training_json(options.run_dir, state)
                last_checkpoint = time.time()
    except BaseException:
        if pending:
            with contextlib.suppress(Exception):  # the error that stopped the loop is the one to report
                write_pending()
        raise
    if pending:
        write_pending()
    return STOP_NAMES[wish]


def _print_progress(step: int, loss: float, rate: float, elapsed: float, budget: float, first: bool) -> None:
    what = "first step (graph tracing)" if first else f"{rate:.2f} steps/s"
    print(
        f"step {step}  loss {loss:.4f}  {what}  elapsed {format_duration(max(elapsed, 0.001))} "
        f"of {format_duration(budget)}",
        flush=True,
    )
