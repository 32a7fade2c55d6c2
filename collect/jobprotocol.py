"""The progress protocol: the job appends one JSON object per line to the file named by WORKBENCH_PROGRESS.

    {"step": 120, "examples": 3840, "loss": 0.41}

`step` (whole number, global, ≥ 1) makes the line a step; `examples` (cumulative) and `loss` are optional;
`time_unix` (time.time() when the step ended) is optional, the time the collector read the line otherwise.
A line may declare what the job is: `batch_size` (global, whole number), `precision`, `framework`,
`framework_version`, `library`, `workload_name`, `flops_per_example` (forward + backward FLOPs of one
training example, a number > 0); the last value given wins. Every other key is kept: the
file stays in the run directory as written, and the numeric keys of the first step become training.csv
columns. A line that is not a JSON object, or whose known keys have the wrong type, is skipped and counted.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collect.jobsteps import Step

PROTOCOL_FILE = "progress.jsonl"
MAX_RECORD_BYTES = 64 * 1024
READ_BYTES = 1 << 20  # at most this much of the file per read: a runaway writer cannot fill our memory
DECLARATIONS = {
    "batch_size": int,
    "precision": str,
    "framework": str,
    "framework_version": str,
    "library": str,
    "workload_name": str,
    "flops_per_example": float,  # forward + backward FLOPs of one training example: the report's MFU
}
STEP_KEYS = ("step", "examples", "loss", "time_unix", "epoch")
TIME_SLACK_S = 5.0  # a line's own time_unix is believed within the run, give or take this


@dataclass
class Parsed:
    step: Step | None = None
    declared: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None  # why the line was skipped


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def parse_record(line: bytes, seen_at: float, start_unix: float) -> Parsed:
    """One line of the protocol file (without its newline)."""
    try:
        record = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return Parsed(problem="not JSON")
    if not isinstance(record, dict):
        return Parsed(problem="not a JSON object")
    declared: dict[str, Any] = {}
    for key, kind in DECLARATIONS.items():
        if key not in record:
            continue
        value = record[key]
        if kind is int and not (_is_number(value) and float(value).is_integer() and value >= 1):
            return Parsed(problem=f"{key} is not a whole number ≥ 1")
        if kind is str and not (isinstance(value, str) and value.strip()):
            return Parsed(problem=f"{key} is not a non-empty string")
        if kind is float and not (_is_number(value) and math.isfinite(value) and value > 0):
            return Parsed(problem=f"{key} is not a number > 0")
        declared[key] = value.strip() if kind is str else kind(value)
    if "step" not in record:
        return Parsed(declared=declared)
    step = record["step"]
    if not (_is_number(step) and float(step).is_integer() and step >= 0):
        return Parsed(problem="step is not a whole number ≥ 0")
    for key in ("examples", "loss", "time_unix"):
        if key in record and record[key] is not None and not _is_number(record[key]):
            return Parsed(problem=f"{key} is not a number")
    examples = record.get("examples")
    if examples is not None and not (math.isfinite(examples) and examples >= 0):
        return Parsed(problem="examples is not a count ≥ 0")
    when = record.get("time_unix")
    if when is None or not (start_unix - TIME_SLACK_S <= when <= seen_at + TIME_SLACK_S):
        when = seen_at
    extras = {
        key: float(value)
        for key, value in record.items()
        if key not in STEP_KEYS and key not in DECLARATIONS and _is_number(value) and math.isfinite(value)
    }
    loss = None if record.get("loss") is None else float(record["loss"])
    return Parsed(Step(int(step), float(when), examples, loss, extras), declared)


class ProtocolReader:
    """Reads the lines appended to the protocol file since the last call; keeps a partial last line."""

    def __init__(self, path: Path, start_unix: float) -> None:
        self.path = Path(path)
        self.start_unix = start_unix
        self.lines = 0
        self.malformed = 0
        self.problems: dict[str, int] = {}
        self._offset = 0
        self._partial = b""
        self._skipping = False  # inside a line longer than MAX_RECORD_BYTES
        self._fd: int | None = None
        self.more = False  # the last read left some of the file for the next

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def read(self, now: float, final: bool = False) -> list[Parsed]:
        """The records appended since the last call (kept open: a poll costs an fstat when nothing came)."""
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            size = os.fstat(self._fd).st_size
            if size < self._offset:
                self._offset, self._partial = 0, b""  # truncated: read it again from the start
            data = (
                os.pread(self._fd, min(size - self._offset, READ_BYTES), self._offset)
                if size > self._offset
                else b""
            )
            self._offset += len(data)
            self.more = size > self._offset
        except OSError:
            self.more = False
            return []
        final = final and not self.more
        if not data and not (final and self._partial):
            return []
        found = []
        data = self._partial + data
        if self._skipping:  # the rest of a line too long to keep
            cut = data.find(b"\n")
            data, self._partial = (b"", b"") if cut < 0 else (data[cut + 1 :], b"")
            self._skipping = cut < 0
        lines = data.split(b"\n")
        self._partial = lines.pop()
        if final and self._partial.strip():
            lines.append(self._partial)  # the job ended: its last line needs no newline
            self._partial = b""
        for line in lines:
            if line.strip():
                found.append(self._parse(line, now))
        if len(self._partial) > MAX_RECORD_BYTES:
            self._partial, self._skipping = b"", True
            found.append(self._count(Parsed(problem=f"a line longer than {MAX_RECORD_BYTES} bytes")))
        return [parsed for parsed in found if parsed.problem is None]

    def _parse(self, line: bytes, now: float) -> Parsed:
        if len(line) > MAX_RECORD_BYTES:
            return self._count(Parsed(problem=f"a line longer than {MAX_RECORD_BYTES} bytes"))
        return self._count(parse_record(line, now, self.start_unix))

    def _count(self, parsed: Parsed) -> Parsed:
        self.lines += 1
        if parsed.problem is not None:
            self.malformed += 1
            self.problems[parsed.problem] = self.problems.get(parsed.problem, 0) + 1
        return parsed
