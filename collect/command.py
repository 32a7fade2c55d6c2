"""The launched command: its own session and process group, output pumped to command.log and the console."""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

_CHUNK = 1 << 16
_PR_SET_PDEATHSIG = 1


def _end_with_the_collector(collector_pid: int) -> Callable[[], None]:
    """In the child, before exec: SIGTERM when the collector dies, even by kill -9, so the command never
    runs on unrecorded. (Linux only; elsewhere a no-op.)"""

    def arm() -> None:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != collector_pid:  # the collector died before the line above took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return arm


def exit_status(returncode: int) -> int:
    """A shell-style status: the code itself, or 128+N for death by signal N."""
    return 128 - returncode if returncode < 0 else returncode


class RunningCommand:
    """A started command. Signals go to its whole process group; exit is detected without reaping it,
    so the collector can take a last sample of the finished process before `reap()`."""

    def __init__(self, argv: list[str], env: dict[str, str], log_path: Path, echo: bool) -> None:
        self._log: IO[bytes] | None = open(log_path, "ab", buffering=0)  # noqa: SIM115
        try:
            self.process = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env={**env, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},  # CUDA numbers GPUs as NVML does
                start_new_session=True,
                close_fds=True,
                preexec_fn=_end_with_the_collector(os.getpid()),
            )
        except BaseException:
            self._log.close()
            raise
        self.pid = self.process.pid
        self.returncode: int | None = None
        self.log_error: str | None = None
        self._echo = echo
        self._stop_r, self._stop_w = os.pipe2(os.O_CLOEXEC)
        self.pidfd = self._open_pidfd()
        self._pump = threading.Thread(target=self._pump_output, name="collect-output", daemon=True)
        self._pump.start()

    def _open_pidfd(self) -> int | None:
        try:
            return os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            return None

    def _pump_output(self) -> None:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while True:
            ready, _, _ = select.select([fd, self._stop_r], [], [])
            if fd not in ready:
                return  # told to stop: a straggler still holds the pipe after the command ended
            try:
                chunk = os.read(fd, _CHUNK)
            except OSError:
                return
            if not chunk:
                return
            self._write_log(chunk)
            if self._echo:
                self._write_console(chunk)

    def _write_log(self, chunk: bytes) -> None:
        if self._log is None or self.log_error:
            return
        try:
            self._log.write(chunk)
        except OSError as exc:
            self.log_error = f"cannot write command.log: {exc.strerror or exc}"

    def _write_console(self, chunk: bytes) -> None:
        try:
            buffer = getattr(sys.stdout, "buffer", None)
            if buffer is not None:
                buffer.write(chunk)
            else:
                sys.stdout.write(chunk.decode(errors="replace"))
            sys.stdout.flush()
        except (OSError, ValueError):
            self._echo = False  # console gone (closed pipe): keep logging only

    def has_exited(self) -> bool:
        """True once the command has ended (it stays a zombie until `reap`)."""
        if self.returncode is not None:
            return True
        try:
            return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    def signal_group(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signum)

    def group_alive(self) -> bool:
        try:
            os.killpg(self.pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def reap(self) -> int:
        if self.returncode is None:
            self.returncode = self.process.wait()
        return self.returncode

    def finish(self, drain_timeout_s: float = 2.0) -> None:
        """Wait for the output to drain (a straggler holding the pipe is cut off), then close the log."""
        self._pump.join(drain_timeout_s)
        os.write(self._stop_w, b"x")
        self._pump.join()
        for fd in (self._stop_r, self._stop_w, self.pidfd):
            if fd is not None:
                os.close(fd)
        self.pidfd = None
        if self.process.stdout is not None:
            self.process.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None

    def kill_now(self) -> None:
        """Last resort when the collector itself fails unexpectedly."""
        self.signal_group(signal.SIGKILL)
        self.reap()
