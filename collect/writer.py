"""telemetry.csv: header fixed at the first row, every row flushed as it is written."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import IO

from collect.sources.base import Reading


class TelemetryWriteError(Exception):
    """Writing telemetry.csv failed (disk full, I/O error); the message is one line for the user."""


def format_cell(value: float | int | None) -> str:
    return "" if value is None else str(value)


class TelemetryWriter:
    def __init__(self, path: Path, columns: list[str]) -> None:
        self.path = path
        self.columns = list(columns)
        self.rows = 0
        self._file: IO[str] | None = None
        try:
            self._file = open(path, "w", encoding="ascii", newline="", buffering=1 << 16)  # noqa: SIM115
            self._emit(",".join(self.columns) + "\n")
        except OSError as exc:
            raise TelemetryWriteError(f"cannot write {path}: {exc.strerror or exc}") from exc

    def _emit(self, line: str) -> None:
        assert self._file is not None
        self._file.write(line)
        self._file.flush()

    def write(self, row: Reading) -> None:
        line = ",".join([format_cell(row.get(column)) for column in self.columns]) + "\n"
        try:
            self._emit(line)
        except OSError as exc:
            raise TelemetryWriteError(f"cannot write {self.path}: {exc.strerror or exc}") from exc
        self.rows += 1

    def close(self) -> None:
        """Flush and fsync; after a write error the unwritten rest is dropped without a second error."""
        handle, self._file = self._file, None
        if handle is None:
            return
        try:
            handle.flush()
            os.fsync(handle.fileno())
        except OSError:
            pass
        with contextlib.suppress(OSError):
            handle.close()
