"""The collector's own CPU per tick as it really runs, and where a tick's CPU goes (sampler_overhead.py)."""

from __future__ import annotations

import io
import math
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from collect.progress import ProgressReporter
from collect.session import SessionOptions, run_session
from collect.sources import SourceSet
from collect.writer import TelemetryWriter

REPO = Path(__file__).resolve().parents[2]
_TICKS_PER_S = os.sysconf("SC_CLK_TCK")

# A stand-in for the training's own progress: a training.csv row every 0.1 s, as a fast step rate writes.
TRAINING_WRITER = """
import os, time
path = os.path.join(os.environ["WORKBENCH_RUN_DIR"], "training.csv")
with open(path, "w") as out:
    out.write("time_unix,elapsed_s,step,loss_total\\n"); out.flush()
    start = time.time()
    for step in range(1, 1_000_000):
        time.sleep(0.1)
        now = time.time()
        out.write(f"{now:.6f},{now - start:.6f},{step},{1.0 / step:.6f}\\n"); out.flush()
"""


def process_cpu_ns(pid: int) -> int | None:
    """CPU time of every thread of `pid` so far: schedstat's nanoseconds, or /proc/PID/stat's ticks on a
    kernel without schedstat. None when a thread ended between the listing and its read: its time has
    left schedstat, and a reading in ticks beside one in nanoseconds could difference to zero or below."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as handle:
                total += int(handle.read().split()[0])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, IndexError):
            return _stat_ns(pid)
    return total


def _stat_ns(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) * 1_000_000_000 // _TICKS_PER_S


def _new_rows(handle: io.BufferedReader) -> int:
    return handle.read().count(b"\n")


def collector_cpu_per_tick(interval_s: float, duration_s: float, workdir: Path, command: list[str]) -> float:
    """ms of CPU per tick of `python -m collect run --interval ...`, over the rows it wrote in between."""
    data_dir = workdir / f"cli-{interval_s:g}"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    argv = [sys.executable, "-m", "collect", "run", "--no-echo", "--data-dir", str(data_dir)]
    argv += ["--interval", f"{interval_s * 1000:g}ms", "--duration", f"{duration_s:g}s", "--", *command]
    expected_rows = round(duration_s / interval_s) + 1
    collector = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    poll_s = min(0.005, interval_s / 4)
    first: tuple[int, int] | None = None
    last: tuple[int, int] | None = None
    try:
        csv_path = _wait_for_csv(data_dir, collector)
        with open(csv_path, "rb") as handle:
            rows = -1  # the header
            while collector.poll() is None:
                added = _new_rows(handle)
                if added:
                    rows += added
                    cpu = process_cpu_ns(collector.pid)
                    if rows >= expected_rows - 1:
                        break  # the stop begins: not a tick
                    if cpu is None:
                        continue  # a thread ended while being read: the next row's reading will do
                    if first is None and rows >= 2:  # past the start-up and the first (priming) tick
                        first = (rows, cpu)
                    elif first is not None:
                        last = (rows, cpu)
                time.sleep(poll_s)
    finally:
        collector.wait(timeout=120)
    if first is None or last is None or last[0] <= first[0]:
        return math.nan
    return (last[1] - first[1]) / (last[0] - first[0]) / 1e6


def _wait_for_csv(data_dir: Path, collector: subprocess.Popen[bytes]) -> Path:
    while collector.poll() is None:
        found = list((data_dir / "runs").glob("*/telemetry.csv")) if (data_dir / "runs").is_dir() else []
        if found:
            return found[0]
        time.sleep(0.01)
    raise RuntimeError(f"python -m collect run exited {collector.returncode} before writing telemetry.csv")


@contextmanager
def _timed(owner: Any, name: str, costs: Counter[str], label: str) -> Iterator[None]:
    """Charge the sampling thread's CPU spent in owner.name to `label` while inside."""
    original = getattr(owner, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time_ns()
        try:
            return original(*args, **kwargs)
        finally:
            costs[label] += time.thread_time_ns() - started

    setattr(owner, name, timed)
    try:
        yield
    finally:
        setattr(owner, name, original)


def tick_breakdown(interval_s: float, duration_s: float, workdir: Path) -> tuple[dict[str, float], int]:
    """µs of the sampling thread's CPU per tick, by part, in a session with a live progress line."""
    costs: Counter[str] = Counter()
    progress = ProgressReporter(3600.0, io.StringIO(), every_s=1.0)  # a terminal's rate, into memory
    ticks: list[int] = []
    total_at: list[int] = []

    def on_sample(row: dict[str, float | None]) -> None:
        started = time.thread_time_ns()
        progress.on_sample(row)
        costs["progress line (and reading training.csv)"] += time.thread_time_ns() - started
        ticks.append(1)
        total_at.append(time.thread_time_ns())

    options = SessionOptions(
        data_dir=workdir / "breakdown",
        interval_s=interval_s,
        duration_s=duration_s,
        command=[sys.executable, "-c", TRAINING_WRITER],
        echo_output=False,
        stop_grace_s=(2.0, 2.0),
    )
    with (
        _sources_timed(costs),
        _timed(TelemetryWriter, "write", costs, "writing the row"),
        _timed(SourceSet, "maintain", costs, "housekeeping (process-tree rescans)"),
    ):
        run_session(options, on_start=progress.start, on_sample=on_sample)
    count = len(ticks) - 1
    per_tick = {label: ns / len(ticks) / 1000.0 for label, ns in costs.items()}
    steady = (total_at[-1] - total_at[0]) / count / 1000.0 if count > 0 else math.nan
    per_tick["the loop (waiting, signals, lateness, the row's dict)"] = steady - sum(per_tick.values())
    return per_tick, len(ticks)


@contextmanager
def _sources_timed(costs: Counter[str]) -> Iterator[None]:
    original = SourceSet.sample_into

    def timed(source: Any) -> Callable[[float], Any]:
        untimed = source.sample

        def sample(now: float) -> Any:
            started = time.thread_time_ns()
            reading = untimed(now)
            costs[f"source {source.name}"] += time.thread_time_ns() - started
            return reading

        return sample

    def sample_into(self: SourceSet, row: dict[str, Any], now: float, fresh: bool = False) -> None:
        for source in self.sources:  # the real reads only: a reading repeated on a held tick costs its own
            if "sample" not in vars(source):
                source.sample = timed(source)
        original(self, row, now, fresh)

    SourceSet.sample_into = sample_into  # type: ignore[method-assign]
    try:
        yield
    finally:
        SourceSet.sample_into = original  # type: ignore[method-assign]


def print_breakdown(per_tick: dict[str, float], ticks: int, say: Callable[[str], None] = print) -> None:
    total = sum(per_tick.values())
    say(f"where a 10 ms tick's CPU goes ({ticks} ticks, sampling thread, progress line on): {total:.0f} µs")
    for label, micros in sorted(per_tick.items(), key=lambda item: -item[1]):
        say(f"  {label}: {micros:.1f} µs ({micros / total * 100.0:.0f} %)")
