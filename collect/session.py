"""One recording: a run directory, a drift-free sampling loop and (optionally) the command it watches.

The sampling loop runs in the calling thread on absolute deadlines of a monotonic clock (tick k is due at
t0 + k*interval, however long earlier ticks took); the command's output is pumped by a thread.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from collect.command import RunningCommand
from collect.gpu_state import GpuStateWatch, watch_gpu_state
from collect.lateness import TickStats
from collect.options import (
    EXIT_COLLECTOR_FAILED,
    EXIT_DEADLINE,
    EXIT_INTERRUPTED,
    MIN_INTERVAL_S,
    SessionOptions,
    SessionResult,
    check_options,
    end_reason_and_exit,
)
from collect.priority import PriorityChange, raise_priority
from collect.run_record import COLLECTOR_RESERVE_BYTES, command_failure, initial_record, sampler_record
from collect.rundir import SessionError, create_run_dir
from collect.sources import SourceSet, build_sources
from collect.stopping import Stopper, stop_signals_caught
from collect.writer import TelemetryWriteError, TelemetryWriter
from runformat import (
    COMMAND_LOG,
    RUN_DIR_ENV,
    RUN_ID_ENV,
    RUN_JSON,
    TELEMETRY_CSV,
    write_json_atomic,
)
from runformat.diskfull import DiskFull, Reserve

TIME_COLUMNS = ["time_unix", "elapsed_s", "late_ms", "skipped_ticks"]
_PRIME_LEAD_S = 0.2  # the first row's rates cover at most this long
_POLL_WITHOUT_PIDFD_S = 0.05


def _say(line: str) -> None:
    """One line on stderr; a closed or hung-up console loses the line, never the run."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


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
        self.ticks = TickStats(self.interval)
        self.error: str | None = None
        self.failure: dict[str, Any] | None = None  # run.json's `failure` (a full disk)
        self.reserve: Reserve | None = None
        self.progress_error: str | None = None
        self.writer: TelemetryWriter | None = None
        self.command: RunningCommand | None = None
        self.priority = PriorityChange("not raised")
        self.pending_signals: list[int] = []
        self.finished_reason: str | None = None
        self.command_ended = False
        self._may_have_exited = True  # check the command's state on the next pass through the loop
        self._wake_r = self._wake_w = -1
        self.gpu_state: GpuStateWatch | None = None  # None: no NVML, no GPU state

    # ---- setup -------------------------------------------------------------------------------

    def start(self) -> None:
        options = self.options
        self.start_unix = time.time()
        self.start_us = round(self.start_unix * 1e6)
        start = datetime.fromtimestamp(self.start_unix, timezone.utc)
        self.sources: SourceSet = build_sources(options.hardware, follow_command=options.command is not None)
        self.sources.pace(self.interval)
        try:
            self.gpu_state = watch_gpu_state(self.sources, options.hardware.proc_root)  # before the command
            self.run_dir = create_run_dir(options.data_dir, options.device, start)
            self.reserve = Reserve.create(self.run_dir, "collect", COLLECTOR_RESERVE_BYTES)
            columns = TIME_COLUMNS + self.sources.columns()
            self.writer = TelemetryWriter(self.run_dir / TELEMETRY_CSV, columns, self.sources.held_columns())
            self.record = initial_record(options, self.run_dir.name, self.sources, self.start_unix)
            if self.gpu_state is not None:
                self.record["gpu_state"] = self.gpu_state.record()
            write_json_atomic(self.run_dir / RUN_JSON, self.record)
            if options.tick_sink is not None:
                options.tick_sink.start(self.run_dir, self.record, self.sources)
        except BaseException as exc:
            self.sources.close()
            if self.reserve is not None:
                self.reserve.release()
            if self.writer is not None:
                self.writer.close()
            if isinstance(exc, TelemetryWriteError):
                raise SessionError(str(exc)) from exc
            if isinstance(exc, OSError):
                raise SessionError(f"cannot write run.json: {exc}") from exc
            raise

    def _launch(self) -> None:
        argv, extra_env = self.options.command_in(self.run_dir)
        env = dict(os.environ)
        env[RUN_DIR_ENV] = str(self.run_dir)
        env[RUN_ID_ENV] = self.run_dir.name
        env.setdefault("PYTHONUNBUFFERED", "1")  # so a Python command's output shows up as it happens
        env.update(extra_env)
        self.command = RunningCommand(
            argv,
            env,
            self.run_dir / COMMAND_LOG,
            self.options.echo_output,
            orphan_grace_s=sum(self.options.stop_grace_s),
            on_output=self.options.output_sink,
        )
        self.sources.process.attach(self.command.pid)

    # ---- signals -----------------------------------------------------------------------------

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.pending_signals.append(signum)

    def _handle_signals(self, now: float) -> None:
        while self.pending_signals:
            self.pending_signals.pop()
            if self.command is None:
                self.finished_reason = "interrupted"
            else:
                self.stopper.request("interrupted", now)

    # ---- the loop ----------------------------------------------------------------------------

    def _wait_until(self, when: float) -> None:
        """Sleep until `when`, a signal, or the command's end (its pidfd turns readable)."""
        timeout = when - time.monotonic()
        watched = self._watched
        if self.command is not None and not self.command_ended:
            if self.command.pidfd is None:
                timeout = min(timeout, _POLL_WITHOUT_PIDFD_S)
                self._may_have_exited = True
            elif len(watched) == 1:
                watched = self._watched = [self._wake_r, self.command.pidfd]
        elif len(watched) > 1:
            watched = self._watched = [self._wake_r]
        if timeout <= 0:
            self._may_have_exited = True  # running behind: no select to say so
            return
        ready, _, _ = select.select(watched, [], [], timeout)
        if ready:
            if self._wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_r, 512)
            self._may_have_exited = True

    def _tick(self, now: float, wall_us: int, late_s: float, skipped: int) -> None:
        row: dict[str, float | None] = {
            "time_unix": wall_us / 1e6,
            "elapsed_s": (wall_us - self.start_us) / 1e6,
            "late_ms": round(late_s * 1e6) / 1000.0,
            "skipped_ticks": skipped,
        }
        self.sources.sample_into(row, now, fresh=self.command_ended)
        if self.writer is not None:
            try:
                self.writer.write(row, self.sources.held_reads)
                self.ticks.samples += 1
            except TelemetryWriteError as exc:
                self._fail(str(exc), now, exc.disk_full)
        if self.options.tick_sink is not None:
            self.options.tick_sink.tick(row)
        self.ticks.add(late_s, skipped)
        if self.on_sample is not None:
            try:
                self.on_sample(row)
            except OSError as exc:  # the console is gone (hung-up terminal, closed pipe): drop the line
                self.on_sample = None
                self.progress_error = f"progress line dropped: {exc.strerror or exc}"
        self.sources.maintain(after := time.monotonic())
        if self.gpu_state is not None:
            self.gpu_state.maintain(after)

    def _fail(self, message: str, now: float, disk_full: DiskFull | None = None) -> None:
        """The collector cannot go on recording: say so once, stop the command gracefully."""
        if self.error is None:
            self.error = message
            _say(f"collect: {message}; stopping")
            if disk_full is not None:
                self.failure = disk_full.record("collector", self.run_dir)
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        if self.command is None:
            self.finished_reason = "failed"
        else:
            self.stopper.request("disk full" if disk_full else "failed", now)

    def loop(self) -> None:
        self.ticks.start_clock(time.monotonic())
        try:
            self._loop()
        finally:
            self.ticks.stop_clock(time.monotonic())

    def _loop(self) -> None:
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
            # Both clocks at once: the row's time less its lateness is then its deadline on the wall clock.
            wall_us = time.time_ns() // 1000  # whole microseconds: cheaper than round(x, 6)
            if self.pending_signals:
                self._handle_signals(now)
            if self.finished_reason is not None:
                return
            if self._may_have_exited and self.command is not None and not self.command_ended:
                self._may_have_exited = False
                if self.command.has_exited():
                    self.command_ended = True  # one more tick on the grid records the state after it
            if self.stopper.due(now) and not self.command_ended:
                self.stopper.advance(now)
            if now < deadline:
                continue
            due_index = max(k, int((now - t0) / interval))
            if last_index is not None and self.stopper.reason is None:
                due_index = min(due_index, last_index)
            self._tick(now, wall_us, now - (t0 + due_index * interval), due_index - k)
            k = due_index + 1
            if now >= self.ticks.cost_check_at and (warning := self.ticks.cost_warning(now)):
                _say(f"collect: {warning}")
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
        return end_reason_and_exit(
            self.error is not None, self.stopper.reason or self.finished_reason, command_code
        )

    def final_record(self, end_reason: str) -> dict[str, Any]:
        end_unix = time.time()
        record = dict(self.record)
        record.update(
            end_utc=datetime.fromtimestamp(end_unix, timezone.utc).isoformat(),
            end_unix=round(end_unix, 6),
            actual_duration_s=round(end_unix - self.start_unix, 3),
            end_reason=end_reason,
            exit_code=None if self.command is None else self.command.returncode,
            samples=self.ticks.samples,
            late_ticks=self.ticks.late_ticks,
            skipped_ticks=self.ticks.skipped_ticks,
            sources=self.sources.final_status(),
        )
        if self.gpu_state is not None:
            record["gpu_state"] = self.gpu_state.record()
        record["sampler"] = sampler_record(
            self.priority.description, self.ticks.sampler_record(), self.progress_error, self.command
        )
        self.stopper.add_to_record(record)
        if self.error is not None:
            record["error"] = self.error
        failure = self.failure
        if failure is None and self.command is not None and self.command.returncode not in (None, 0):
            failure = command_failure(self.run_dir)  # the training's own full disk
        if failure is not None:
            record["failure"] = failure
        return record

    def run(self) -> SessionResult:
        self.start()
        self.stopper = Stopper(None, self.options.stop_grace_s)
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._watched = [self._wake_r]
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
        return SessionResult(self.run_dir, exit_code, self.end_reason_and_exit()[0], self.ticks.samples)

    def _record(self) -> None:
        try:
            if self.on_start is not None:
                self.on_start(self.run_dir)
            with stop_signals_caught(self._on_signal, self._wake_w):
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
        if self.reserve is not None:  # its room is for what follows, even on a full disk
            self.reserve.release()
        if self.command is not None:
            self.command.write_unwritten()
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
        self.stopper = Stopper(self.command, self.options.stop_grace_s, _say)

    def _settle_command(self) -> None:
        if self.command is not None:
            self.command.settle(self.stopper.reason is not None, self.options.stop_grace_s)

    def _close(self) -> None:
        if self.gpu_state is not None:
            self.gpu_state.read_end()  # after the command settled, before NVML shuts down
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
    check_options(options)
    return _Session(options, on_start, on_sample).run()


__all__ = [
    "EXIT_COLLECTOR_FAILED",
    "EXIT_DEADLINE",
    "EXIT_INTERRUPTED",
    "MIN_INTERVAL_S",
    "SessionError",
    "SessionOptions",
    "SessionResult",
    "run_session",
]
