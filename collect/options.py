"""What a recording is asked to do (SessionOptions) and how it ended (SessionResult, exit codes)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from collect.command import exit_status
from collect.sources import Hardware, SourceSet
from runformat.duration import MIN_INTERVAL_S

RUN_DIR_PLACEHOLDER = "{run_dir}"  # in a command's arguments and extra environment: the run directory
EXIT_DEADLINE = 124
EXIT_INTERRUPTED = 130
EXIT_COLLECTOR_FAILED = 1


def timed_parser(description: str, epilog: str, duration_help: str) -> argparse.ArgumentParser:
    """`collect timed`'s parser, for both of its forms (our training, a job's), with what they share."""
    from runformat.cli import OneLineParser

    parser = OneLineParser(prog="python -m collect timed", description=description, epilog=epilog)
    parser.add_argument("duration", help=duration_help)
    add_timed_options(parser)
    return parser


def add_timed_options(parser: argparse.ArgumentParser) -> None:
    """What `collect timed` asks of both of its forms, our training and a job's: device, sampling, where."""
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--interval", default="1s", help="sampling interval (default 1s, down to 10ms)")
    parser.add_argument("--label", default="", help="label shown in the dashboard")


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
    extra_env: dict[str, str] = field(default_factory=dict)  # more for the command's env ({run_dir} filled)
    output_sink: Callable[[bytes], None] | None = None  # each chunk of the command's output, then b""

    def command_in(self, run_dir: Path) -> tuple[list[str], dict[str, str]]:
        """The command's arguments and extra environment, RUN_DIR_PLACEHOLDER filled with `run_dir`."""
        fill = str(run_dir)
        argv = [arg.replace(RUN_DIR_PLACEHOLDER, fill) for arg in self.command or []]
        env = {name: value.replace(RUN_DIR_PLACEHOLDER, fill) for name, value in self.extra_env.items()}
        return argv, env


@dataclass
class SessionResult:
    run_dir: Path
    exit_code: int
    end_reason: str
    samples: int


def check_options(options: SessionOptions) -> None:
    """ValueError, one line, for options no recording can run with."""
    if not options.interval_s >= MIN_INTERVAL_S:
        raise ValueError(f"interval must be at least {MIN_INTERVAL_S * 1000:g}ms")
    if options.duration_s is not None and not options.duration_s > 0:
        raise ValueError("duration must be greater than zero")
    if options.command is not None and not options.command:
        raise ValueError("empty command")
    if options.device not in ("cpu", "gpu"):
        raise ValueError(f"device must be cpu or gpu, got {options.device!r}")


def end_reason_and_exit(
    collector_failed: bool, reason: str | None, command_code: int | None
) -> tuple[str, int]:
    """run.json's end_reason and the collector's exit code (docs/run-format.md)."""
    if collector_failed:
        return "failed", EXIT_COLLECTOR_FAILED
    if reason == "deadline":
        return "deadline", EXIT_DEADLINE
    if reason == "interrupted":
        return "interrupted", EXIT_INTERRUPTED
    if command_code is None:
        return "completed", 0
    return ("completed" if command_code == 0 else "failed"), exit_status(command_code)
