"""One recording: a run directory, a drift-free sampling loop and (optionally) the command it watches.

The sampling loop runs in the calling thread on absolute deadlines of a monotonic clock (tick k is due at
t0 + k*interval, however long earlier ticks took); the command's output is pumped by a thread.
"""

from __future__ import annotations

import contextlib
import os
import random
import select
import signal
import socket
import sys
import threading
import time
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from collect.command import RunningCommand, exit_status
from collect.priority import PriorityChange, raise_priority
from collect.sources import Hardware, SourceSet, build_sources
from collect.sysinfo import system_info
from collect.writer import TelemetryWriteError, TelemetryWriter
from runformat import (
    COMMAND_LOG,
    FORMAT_VERSION,
    RUN_DIR_ENV,
    RUN_ID_ENV,
    RUN_JSON,
    RUNS_SUBDIR,
    TELEMETRY_CSV,
    new_run_id,
    write_json_atomic,
)

MIN_INTERVAL_S = 0.01
EXIT_DEADLINE = 124
EXIT_INTERRUPTED = 130
EXIT_COLLECTOR_FAILED = 1
RUN_DIR_PLACEHOLDER = "{run_dir}"
TIME_COLUMNS = ["time_unix", "elapsed_s", "late_ms", "skipped_ticks"]
_PRIME_LEAD_S = 0.2  # the first row's rates cover at most this long
_POLL_WITHOUT_PIDFD_S = 0.05
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class TickSink(Protocol):
    """Something fed from the sampling tick itself (e.g. collect.exposition's Prometheus endpoint)."""

    def start(self, run_dir: Path, record: dict[str, Any], sources: SourceSet) -> None: ...

    def tick(self, row: dict[str, Any]) -> None: ...


@dataclass
class SessionOptions:
    data_dir: Path
    device: str = "cpu"
    interval_s: float = 1.0
    duration_s: float | None = None
    label: str = ""
    command: list[str] | None = None  # None = sampling only
    echo_output: bool = True  # tee the command's output to our stdout
    stop_grace_s: tuple[float, float] = (20.0, 10.0)  # SIGINT -> wait -> SIGTERM -> wait -> SIGKILL
    hardware: Hardware = field(default_factory=Hardware)  # tests pass fake roots / a fake NVML here
    raise_priority: bool = True
    tick_sink: TickSink | None = None  # gets each row right after it is written
    extra_record: dict[str, Any] = field(default_factory=dict)  # more run.json keys (e.g. a sweep's tag)


@dataclass
class SessionResult:
    run_dir: Path
    exit_code: int
    end_reason: str
    samples: int


class SessionError(Exception):
    """The collector could not start (e.g. the run directory cannot be created); one line for the user."""


def create_run_dir(data_dir: Path, device: str, start: datetime) -> Path:
    """data_dir/runs/<run_id>, with -2, -3... when that id is taken."""
    runs = Path(data_dir) / RUNS_SUBDIR
    try:
        runs.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SessionError(f"cannot create {runs}: {exc.strerror or exc}") from exc
    base = new_run_id(device, start)
    for attempt in range(1, 1000):
        candidate = runs / (base if attempt == 1 else f"{base}-{attempt}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            raise SessionError(f"cannot create {candidate}: {exc.strerror or exc}") from exc
        return candidate.resolve()
    raise SessionError(f"too many runs named {base} in {runs}")


def _say(line: str) -> None:
    """One line on stderr; a closed or hung-up console loses the line, never the run."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


def _utc(unix: float) -> str:
    return datetime.fromtimestamp(unix, timezone.utc).isoformat()


class LatenessSample:
    """Lateness of every tick while that fits in memory, then a uniform reservoir of them (Algorithm R),
    so a day at 100 Hz keeps 200,000 values, not 8.6 million."""

    def __init__(self, capacity: int = 200_000) -> None:
        self.capacity = capacity
        self.values = array("d")
        self.seen = 0
        self.maximum: float | None = None
        self._random = random.Random(0)

    def add(self, value: float) -> None:
        self.seen += 1
        self.maximum = value if self.maximum is None else max(self.maximum, value)
        if len(self.values) < self.capacity:
            self.values.append(value)
            return
        slot = self._random.randrange(self.seen)
        if slot < self.capacity:
            self.values[slot] = value

    def percentile(self, fraction: float) -> float | None:
        if not self.values:
            return None
        ordered = sorted(self.values)
        return round(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))], 3)


class _Stopper:
    """Stops the command like a person would: SIGINT, wait, SIGTERM, wait, SIGKILL."""

    def __init__(self, command: RunningCommand | None, grace_s: tuple[float, float]) -> None:
        self._command = command
        self._stages = [(signal.SIGINT, grace_s[0]), (signal.SIGTERM, grace_s[1]), (signal.SIGKILL, None)]
        self.reason: str | None = None
        self.stage = -1
        self.next_at: float | None = None

    def request(self, reason: str, now: float) -> None:
        if self.reason is None:
            self.reason = reason
            self.advance(now)
        elif reason == "interrupted":
            self.advance(now)  # asking again (a second Ctrl-C) skips the rest of the grace period

    def advance(self, now: float) -> None:
        if self._command is None or self.stage + 1 >= len(self._stages):
            self.next_at = None
            return
        self.stage += 1
        signum, grace = self._stages[self.stage]
        self._command.signal_group(signum)
        self.next_at = None if grace is None else now + grace

    def due(self, now: float) -> bool:
        return self.next_at is not None and now >= self.next_at


class _Session:
    def __init__(
        self,
        options: SessionOptions,
        on_start: Callable[[Path], None] | None,
        on_sample: Callable[[dict[str, float | None]], None] | None,
    ) -> None:
        self.options = options
        self.on_start = on_start
        self.on_sample = on_sample
        self.interval = options.interval_s
        self.samples = 0
        self.late_ticks = 0
        self.skipped_ticks = 0
        self.late_ms = LatenessSample()
        self.late_threshold_s = max(0.001, 0.1 * self.interval)
        self.error: str | None = None
        self.progress_error: str | None = None
        self.writer: TelemetryWriter | None = None
        self.command: RunningCommand | None = None
        self.priority = PriorityChange("not raised")
        self.pending_signals: list[int] = []
        self.finished_reason: str | None = None
        self.command_ended = False
        self._wake_r = self._wake_w = -1

    # ---- setup -------------------------------------------------------------------------------

    def start(self) -> None:
        options = self.options
        self.start_unix = time.time()
        start = datetime.fromtimestamp(self.start_unix, timezone.utc)
        self.sources: SourceSet = build_sources(options.hardware, follow_command=options.command is not None)
        try:
            self.run_dir = create_run_dir(options.data_dir, options.device, start)
            self.writer = TelemetryWriter(self.run_dir / TELEMETRY_CSV, TIME_COLUMNS + self.sources.columns())
            self.record = self._initial_record(start)
            write_json_atomic(self.run_dir / RUN_JSON, self.record)
            if options.tick_sink is not None:
                options.tick_sink.start(self.run_dir, self.record, self.sources)
        except (TelemetryWriteError, OSError) as exc:
            self.sources.close()
            if self.writer is not None:
                self.writer.close()
            message = str(exc) if isinstance(exc, TelemetryWriteError) else f"cannot write run.json: {exc}"
            raise SessionError(message) from exc
        except BaseException:
            self.sources.close()
            raise

    def _initial_record(self, start: datetime) -> dict[str, Any]:
        options = self.options
        nvml = self.sources.nvml
        return {
            "format_version": FORMAT_VERSION,
            "run_id": self.run_dir.name,
            "label": options.label,
            "device": options.device,
            "host": socket.gethostname(),
            "command": list(options.command) if options.command is not None else None,
            "interval_s": self.interval,
            "start_utc": start.isoformat(),
            "start_unix": round(self.start_unix, 6),
            "end_utc": None,
            "end_unix": None,
            "requested_duration_s": options.duration_s,
            "actual_duration_s": None,
            "end_reason": "running",
            "exit_code": None,
            "samples": 0,
            "late_ticks": 0,
            "skipped_ticks": 0,
            "system": system_info(
                options.hardware.proc_root,
                gpus=nvml.gpu_info if nvml else [],
                gpu_driver_version=nvml.driver_version if nvml else None,
                cuda_version=nvml.cuda_version if nvml else None,
            ),
            "sources": self.sources.status,
            "sampler": {"priority": "not raised yet"},
            **options.extra_record,
        }

    def _launch(self) -> None:
        argv = [arg.replace(RUN_DIR_PLACEHOLDER, str(self.run_dir)) for arg in self.options.command or []]
        env = dict(os.environ)
        env[RUN_DIR_ENV] = str(self.run_dir)
        env[RUN_ID_ENV] = self.run_dir.name
        env.setdefault("PYTHONUNBUFFERED", "1")  # so a Python command's output shows up as it happens
        self.command = RunningCommand(
            argv,
            env,
            self.run_dir / COMMAND_LOG,
            self.options.echo_output,
            orphan_grace_s=sum(self.options.stop_grace_s),
        )
        self.sources.process.attach(self.command.pid)

    # ---- signals -----------------------------------------------------------------------------

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.pending_signals.append(signum)

    @contextlib.contextmanager
    def _signals_caught(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        # A signal ignored when we started (SIGHUP under nohup) stays ignored: a detached run survives
        # the end of the login session that started it.
        caught = [signum for signum in _STOP_SIGNALS if signal.getsignal(signum) != signal.SIG_IGN]
        previous = {signum: signal.signal(signum, self._on_signal) for signum in caught}
        previous_wakeup = signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
        try:
            yield
        finally:
            signal.set_wakeup_fd(previous_wakeup)
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _handle_signals(self, now: float) -> None:
        while self.pending_signals:
            self.pending_signals.pop()
            if self.command is None:
                self.finished_reason = "interrupted"
            else:
                self.stopper.request("interrupted", now)

    # ---- the loop ----------------------------------------------------------------------------

    def _wait_until(self, when: float) -> None:
        timeout = when - time.monotonic()
        if self.command is not None and self.command.pidfd is None and not self.command_ended:
            timeout = min(timeout, _POLL_WITHOUT_PIDFD_S)
        if timeout <= 0:
            return
        watched = [self._wake_r]
        if self.command is not None and self.command.pidfd is not None and not self.command_ended:
            watched.append(self.command.pidfd)
        ready, _, _ = select.select(watched, [], [], timeout)
        if self._wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(self._wake_r, 512)

    def _tick(self, now: float, late_s: float, skipped: int) -> None:
        wall = time.time()
        row: dict[str, float | None] = {
            "time_unix": round(wall, 6),
            "elapsed_s": round(wall - self.start_unix, 6),
            "late_ms": round(late_s * 1000.0, 3),
            "skipped_ticks": skipped,
        }
        self.sources.sample_into(row, now)
        if self.writer is not None:
            try:
                self.writer.write(row)
                self.samples += 1
            except TelemetryWriteError as exc:
                self._fail(str(exc), now)
        if self.options.tick_sink is not None:
            self.options.tick_sink.tick(row)
        self.skipped_ticks += skipped
        self.late_ms.add(late_s * 1000.0)
        if late_s > self.late_threshold_s:
            self.late_ticks += 1
        if self.on_sample is not None:
            try:
                self.on_sample(row)
            except OSError as exc:  # the console is gone (hung-up terminal, closed pipe): drop the line
                self.on_sample = None
                self.progress_error = f"progress line dropped: {exc.strerror or exc}"
        self.sources.maintain(time.monotonic())

    def _fail(self, message: str, now: float) -> None:
        """The collector cannot go on recording: say so once, stop the command gracefully."""
        if self.error is None:
            self.error = message
            _say(f"collect: {message}; stopping")
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        if self.command is None:
            self.finished_reason = "failed"
        else:
            self.stopper.request("failed", now)

    def loop(self) -> None:
        interval = self.interval
        last_index = None if self.options.duration_s is None else round(self.options.duration_s / interval)
        self.sources.prime(time.monotonic())
        t0 = time.monotonic() + min(interval, _PRIME_LEAD_S)
        k = 0
        while True:
            deadline = t0 + k * interval
            escalation_at = None if self.command_ended else self.stopper.next_at
            wake_at = deadline if escalation_at is None else min(deadline, escalation_at)
            self._wait_until(wake_at)
            now = time.monotonic()
            self._handle_signals(now)
            if self.finished_reason is not None:
                return
            if self.command is not None and not self.command_ended and self.command.has_exited():
                self.command_ended = True  # one more tick on the grid records the state after it
            if self.stopper.due(now) and not self.command_ended:
                self.stopper.advance(now)
            if now < deadline:
                continue
            due_index = max(k, int((now - t0) / interval))
            if last_index is not None and self.stopper.reason is None:
                due_index = min(due_index, last_index)
            self._tick(now, now - (t0 + due_index * interval), due_index - k)
            k = due_index + 1
            if self.command_ended:
                return
            if last_index is not None and due_index >= last_index and self.stopper.reason is None:
                # The duration is up: a sampling-only run ends here, a command is asked to stop.
                if self.command is None:
                    self.finished_reason = "completed"
                    return
                self.stopper.request("deadline", time.monotonic())

    # ---- the end -----------------------------------------------------------------------------

    def end_reason_and_exit(self) -> tuple[str, int]:
        command_code = None if self.command is None else self.command.returncode
        if self.error is not None:
            return "failed", EXIT_COLLECTOR_FAILED
        reason = self.stopper.reason or self.finished_reason
        if reason == "deadline":
            return "deadline", EXIT_DEADLINE
        if reason == "interrupted":
            return "interrupted", EXIT_INTERRUPTED
        if command_code is None:
            return "completed", 0
        return ("completed" if command_code == 0 else "failed"), exit_status(command_code)

    def final_record(self, end_reason: str) -> dict[str, Any]:
        end_unix = time.time()
        record = dict(self.record)
        record.update(
            end_utc=_utc(end_unix),
            end_unix=round(end_unix, 6),
            actual_duration_s=round(end_unix - self.start_unix, 3),
            end_reason=end_reason,
            exit_code=None if self.command is None else self.command.returncode,
            samples=self.samples,
            late_ticks=self.late_ticks,
            skipped_ticks=self.skipped_ticks,
            sources=self.sources.final_status(),
        )
        record["sampler"] = {
            "priority": self.priority.description,
            "late_threshold_ms": round(self.late_threshold_s * 1000.0, 3),
            "late_ms_p50": self.late_ms.percentile(0.5),
            "late_ms_p99": self.late_ms.percentile(0.99),
            "late_ms_max": None if self.late_ms.maximum is None else round(self.late_ms.maximum, 3),
        }
        if self.progress_error is not None:
            record["sampler"]["progress_error"] = self.progress_error
        if self.command is not None and self.command.log_error:
            record["sampler"]["command_log_error"] = self.command.log_error
        if self.error is not None:
            record["error"] = self.error
        return record

    def run(self) -> SessionResult:
        self.start()
        self.stopper = _Stopper(None, self.options.stop_grace_s)
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            self._record()
        except BaseException as exc:
            # Whatever went wrong (a failing callback, Ctrl-C before the handlers were in place), the run
            # directory still says how the run ended.
            if isinstance(exc, KeyboardInterrupt):
                self.finished_reason = "interrupted"
            elif self.error is None:
                self.error = f"collector error: {type(exc).__name__}: {exc}".splitlines()[0]
            self._write_final_record()
            raise
        exit_code = self._write_final_record()
        return SessionResult(self.run_dir, exit_code, self.end_reason_and_exit()[0], self.samples)

    def _record(self) -> None:
        try:
            if self.on_start is not None:
                self.on_start(self.run_dir)
            with self._signals_caught():
                if self.options.command is not None:
                    self._start_command()
                if self.options.raise_priority:
                    self.priority = raise_priority()
                try:
                    if self.error is None:
                        self.loop()
                finally:
                    self.priority.restore()
                    self._settle_command()
        finally:
            self._close()

    def _write_final_record(self) -> int:
        end_reason, exit_code = self.end_reason_and_exit()
        try:
            write_json_atomic(self.run_dir / RUN_JSON, self.final_record(end_reason))
        except OSError as exc:
            _say(f"collect: cannot write the final run.json: {exc}")
            exit_code = EXIT_COLLECTOR_FAILED
        return exit_code

    def _start_command(self) -> None:
        try:
            self._launch()
        except OSError as exc:
            name = (self.options.command or ["?"])[0]
            self.error = f"cannot start {name!r}: {exc.strerror or exc}"
            _say(f"collect: {self.error}")
            return
        self.stopper = _Stopper(self.command, self.options.stop_grace_s)

    def _settle_command(self) -> None:
        """Reap the command; if the loop ended abnormally, stop it gracefully, and make sure no child of a
        command we stopped is left running."""
        command = self.command
        if command is None:
            return
        if not command.has_exited():
            # The collector itself failed: as long as SIGINT-then-SIGTERM would have allowed, for a final
            # checkpoint that may have to wait for a slow step.
            command.stop_gracefully(sum(self.options.stop_grace_s))
        command.reap()
        if self.stopper.reason is not None and command.group_alive():
            command.stop_gracefully(self.options.stop_grace_s[1])  # stragglers of a command we stopped
        command.finish()

    def _close(self) -> None:
        self.sources.close()
        if self.writer is not None:
            self.writer.close()
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                os.close(fd)
        self._wake_r = self._wake_w = -1


def run_session(
    options: SessionOptions,
    on_start: Callable[[Path], None] | None = None,
    on_sample: Callable[[dict[str, float | None]], None] | None = None,
) -> SessionResult:
    """Record one run into options.data_dir/runs/<run_id>/ and return how it ended.

    Raises ValueError for bad options and SessionError when the run directory cannot be set up; once
    the directory exists every outcome is recorded in run.json and reported in the result.
    """
    if not options.interval_s >= MIN_INTERVAL_S:
        raise ValueError(f"interval must be at least {MIN_INTERVAL_S * 1000:g}ms")
    if options.duration_s is not None and not options.duration_s > 0:
        raise ValueError("duration must be greater than zero")
    if options.command is not None and not options.command:
        raise ValueError("empty command")
    if options.device not in ("cpu", "gpu"):
        raise ValueError(f"device must be cpu or gpu, got {options.device!r}")
    return _Session(options, on_start, on_sample).run()
