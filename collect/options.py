"""What a recording is asked to do (SessionOptions) and how it ended (SessionResult, exit codes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from collect.sources import Hardware, SourceSet

MIN_INTERVAL_S = 0.01
EXIT_DEADLINE = 124
EXIT_INTERRUPTED = 130
EXIT_COLLECTOR_FAILED = 1


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


@dataclass
class SessionResult:
    run_dir: Path
    exit_code: int
    end_reason: str
    samples: int
