"""A full disk, as the collector and the training both record it (docs/run-format.md, `failure`).

A write that fails because the filesystem is full (ENOSPC) or the user's quota is spent (EDQUOT) ends a
run as `failed` with `failure: {"reason": "disk full", "path", "free_bytes", "by"}`. Each writer keeps a
small pre-allocated reserve file in the run directory and deletes it just before its final records, so
they can be written even then.
"""

from __future__ import annotations

import contextlib
import errno
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DISK_FULL = "disk full"
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
# How the frameworks' own file writers word it (TensorFlow: "<file>; No space left on device").
DISK_FULL_TEXTS = ("No space left on device", "Disk quota exceeded")
RESERVE_PREFIX = ".reserve-"
_CHAIN_LIMIT = 16


class DiskFullError(OSError):
    """A write failed for want of space: errno ENOSPC, the file, and the free bytes measured right then."""

    def __init__(self, path: str | Path, free_bytes: int | None, code: int = errno.ENOSPC) -> None:
        super().__init__(code, os.strerror(code), str(path))
        self.free_bytes = free_bytes


@dataclass(frozen=True)
class DiskFull:
    path: str | None  # the file that could not be written
    free_bytes: int | None  # free for this user on its filesystem when that was noticed; None: unknown
    detail: str = DISK_FULL_TEXTS[0]  # the system's words: no space left, or the quota spent

    def line(self) -> str:
        """`disk full: cannot write PATH: No space left on device (12.0 kB free on /scratch)`, one line."""
        where = self.path or "a file"
        if self.free_bytes is None:
            return f"{DISK_FULL}: cannot write {where}: {self.detail} (free space unknown)"
        mount = mount_point(self.path) if self.path else None
        on = f" on {mount}" if mount else ""
        return f"{DISK_FULL}: cannot write {where}: {self.detail} ({format_bytes(self.free_bytes)} free{on})"

    def record(self, by: str, run_dir: Path | None = None) -> dict[str, Any]:
        """run.json's / training.json's `failure`; `path` relative to the run directory when inside it."""
        path = self.path
        if path and run_dir is not None:
            with contextlib.suppress(ValueError):
                path = str(Path(path).resolve().relative_to(Path(run_dir).resolve()))
        return {"reason": DISK_FULL, "path": path, "free_bytes": self.free_bytes, "by": by}


def disk_full_in(exc: BaseException | None, path: str | os.PathLike[str] | None = None) -> DiskFull | None:
    """The full disk behind `exc` (itself, or an exception it was raised from or while handling), or None.

    `path` names the file when the error does not (an OSError from os.write has no filename)."""
    seen = 0
    while exc is not None and seen < _CHAIN_LIMIT:
        if isinstance(exc, DiskFullError):
            return DiskFull(exc.filename, exc.free_bytes, exc.strerror)
        if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
            where = exc.filename if exc.filename is not None else path
            detail = exc.strerror or os.strerror(exc.errno)
            return DiskFull(_text(where), free_bytes(where) if where is not None else None, detail)
        text = str(exc)
        for words in DISK_FULL_TEXTS:
            if words in text:
                where = _text(path) or _named_file(text, words)
                return DiskFull(where, free_bytes(where) if where else None, words)
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
        seen += 1
    return None


def _text(path: str | os.PathLike[str] | None) -> str | None:
    return None if path is None else os.fspath(path)


def _named_file(text: str, words: str) -> str | None:
    """TensorFlow's `... /dir/file; No space left on device [Op:SaveV2]`: the last word before it."""
    before = text.split(words, 1)[0].rstrip().rstrip(";:,").split()
    return before[-1] if before and "/" in before[-1] else None


def free_bytes(path: str | os.PathLike[str]) -> int | None:
    """Bytes this user may still write on the filesystem of `path` (its nearest existing parent)."""
    where = Path(path)
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        stats = os.statvfs(where)
    except OSError:
        return None
    return stats.f_bavail * stats.f_frsize


def mount_point(path: str | os.PathLike[str]) -> str | None:
    where = Path(path).absolute()
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        while not os.path.ismount(where):
            where = where.parent
    except OSError:
        return None
    return str(where)


def format_bytes(count: float) -> str:
    """`0 B`, `812 kB`, `40.0 MB`, `1.2 GB` (powers of 1000, as the sizes the issue and df -H give)."""
    if count < 1000:
        return f"{count:.0f} B"
    for unit in ("kB", "MB", "GB", "TB"):
        count /= 1000
        if count < 1000 or unit == "TB":
            return f"{count:.0f} {unit}" if count >= 100 else f"{count:.1f} {unit}"
    raise AssertionError("unreachable")


class Reserve:
    """A pre-allocated file that holds `size_bytes` of the disk for the writer's final records.

    Best effort: where it cannot be made (a full disk already, a file-size limit) the writer goes on
    without one (`held` False). `release()` deletes it; it is idempotent."""

    def __init__(self, path: Path, held: bool) -> None:
        self.path = path
        self.held = held

    @classmethod
    def create(cls, directory: Path, name: str, size_bytes: int) -> Reserve:
        path = Path(directory) / f"{RESERVE_PREFIX}{name}"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError:
            return cls(path, held=False)
        try:
            try:
                os.posix_fallocate(fd, 0, size_bytes)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                _write_zeros(fd, size_bytes)  # a filesystem without fallocate: real blocks all the same
        except OSError:
            os.close(fd)
            with contextlib.suppress(OSError):
                path.unlink()
            return cls(path, held=False)
        os.close(fd)
        return cls(path, held=True)

    def release(self) -> None:
        if self.held:
            self.held = False
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()


def _write_zeros(fd: int, size_bytes: int) -> None:
    block = bytes(64 * 1024)
    written = 0
    while written < size_bytes:
        written += os.write(fd, block[: size_bytes - written])
    os.fsync(fd)
