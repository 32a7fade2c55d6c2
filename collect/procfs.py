"""Files under /proc and /sys kept open and re-read with pread: the cheap way to sample them."""

from __future__ import annotations

import os
from pathlib import Path

_CHUNK = 1 << 16


class KernelFile:
    """One kernel-generated file, opened once; `read()` returns its current content."""

    def __init__(self, path: Path | str, size_hint: int = 4096) -> None:
        self.path = Path(path)
        self._size = max(256, size_hint)
        self._fd: int | None = None
        self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)

    def read(self) -> bytes:
        """The whole file, from offset 0 (the kernel regenerates it on every read)."""
        if self._fd is None:
            raise OSError(f"{self.path} is closed")
        data = os.pread(self._fd, self._size, 0)
        if len(data) < self._size:
            return data
        parts = [data]
        offset = len(data)
        while True:
            chunk = os.pread(self._fd, _CHUNK, offset)
            if not chunk:
                break
            parts.append(chunk)
            offset += len(chunk)
        content = b"".join(parts)
        self._size = len(content) + 1024
        return content

    def read_head(self, size: int) -> bytes:
        """Only the first `size` bytes (e.g. the cpu lines at the top of /proc/stat)."""
        if self._fd is None:
            raise OSError(f"{self.path} is closed")
        return os.pread(self._fd, size, 0)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        if getattr(self, "_fd", None) is not None:
            self.close()


def read_text(path: Path | str) -> str:
    """A small sysfs/procfs attribute as stripped text (for one-off reads at start)."""
    return Path(path).read_text(encoding="utf-8", errors="replace").strip()
