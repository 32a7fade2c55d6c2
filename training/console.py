"""Keep TensorFlow's native start-up chatter off the console without hiding real errors.

TensorFlow's C++ runtime writes straight to file descriptor 2 and logs a few harmless lines at ERROR
level on machines without a GPU (`failed call to cuInit`, a oneDNN DT_BOOL notice), which
TF_CPP_MIN_LOG_LEVEL cannot drop without also dropping real errors. We route descriptor 2 through a
thread that drops only lines matching the known-harmless patterns below; Python's own sys.stderr keeps
writing to the original descriptor directly, so our error lines never wait on the filter.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from typing import Any, TextIO

HARMLESS = re.compile(
    "|".join(
        [
            r"failed call to cuInit",
            r"Could not find cuda drivers",
            r"oneDNN supports DT_BOOL only on platforms with AVX-512",
            r"oneDNN custom operations are on",
            r"This TensorFlow binary is optimized to use available CPU instructions",
            r"To enable the following instructions: ",
            r"Unable to register cu(DNN|FFT|BLAS) factory",
            r"computation placer already registered",
            r"All log messages before absl::InitializeLog\(\) is called",
            r"TF-TRT Warning",
        ]
    )
)


class NativeStderrFilter:
    """Filters fd 2 until `close()`; a no-op where descriptors cannot be rearranged."""

    def __init__(self) -> None:
        self._original = os.dup(2)
        read_end, write_end = os.pipe()
        sys.stderr.flush()
        os.dup2(write_end, 2)
        os.close(write_end)
        sys.stderr = os.fdopen(os.dup(self._original), "w", buffering=1, encoding="utf-8", errors="replace")
        self._reader = os.fdopen(read_end, "rb")
        self._thread = threading.Thread(target=self._pump, name="stderr-filter", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        console_open = True
        for line in self._reader:  # keeps draining after the console is gone, so TensorFlow never blocks
            if console_open and not HARMLESS.search(line.decode("utf-8", errors="replace")):
                try:
                    os.write(self._original, line)
                except OSError:
                    console_open = False

    def close(self, timeout_s: float = 1.0) -> None:
        """Put fd 2 back and let the filter pass on what is still in the pipe."""
        sys.stderr.flush()
        os.dup2(self._original, 2)  # closes our write end of the pipe: the pump sees end-of-file
        self._thread.join(timeout_s)


def filter_native_stderr() -> NativeStderrFilter | None:
    try:
        return NativeStderrFilter()
    except (OSError, ValueError):
        return None


class ForgivingStream:
    """A text stream that drops its output once the other end is gone (a collector killed, a terminal
    hung up, `| head`): the training must never die of its own output."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                self._stream.write(text)
            except (OSError, ValueError):
                self.broken = True
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self.broken = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def tolerate_closed_output() -> None:
    """sys.stdout and sys.stderr ignore a closed or hung-up console from now on."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, ForgivingStream):
            setattr(sys, name, ForgivingStream(stream))


def write_raw(fd: int, text: str) -> None:
    """os.write for signal handlers (no buffered stream to re-enter); a closed console is ignored."""
    with contextlib.suppress(OSError):
        os.write(fd, text.encode())
