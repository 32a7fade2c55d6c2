"""The launched command: its own session and process group, output pumped to command.log and the console."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

_CHUNK = 1 << 16
UNWRITTEN_LOG_BYTES = 64 * 1024  # the newest output kept while command.log cannot be written
_PR_SET_PDEATHSIG = 1


# The watchdog: a separate small process (in its own session, outside the measured process tree) that
# holds the read end of a pipe whose write end only the collector has. Its first line is the command's
# process group; "done" means the collector settled the command itself. End-of-file without "done" means
# the collector died (even by kill -9): the whole group gets SIGTERM, and SIGKILL after the grace period.
# PR_SET_PDEATHSIG alone would reach only the direct child, never its children.
_WATCHDOG = """
import os, signal, sys, time
for name in ("SIGINT", "SIGHUP"):
    signal.signal(getattr(signal, name), signal.SIG_IGN)
grace = float(sys.argv[1])
data = b""
while True:
    chunk = os.read(0, 256)
    if not chunk:
        break
    data += chunk
    if b"done" in data:
        sys.exit(0)
words = data.split()
if not words:
    sys.exit(0)
group = int(words[0])
def alive():
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    return True
if alive():
    os.killpg(group, signal.SIGTERM)
    end = time.monotonic() + grace
    while alive() and time.monotonic() < end:
        time.sleep(0.1)
    if alive():
        os.killpg(group, signal.SIGKILL)
"""


class Watchdog:
    """Stops the command's whole process group when the collector dies without settling it."""

    def __init__(self, grace_s: float) -> None:
        read_end, self.write_fd = os.pipe2(os.O_CLOEXEC)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WATCHDOG, f"{grace_s:g}"],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        except BaseException:
            os.close(self.write_fd)
            raise
        finally:
            os.close(read_end)

    def announce_from_child(self) -> None:
        """Runs in the command's child between fork and exec: its own pid is its process group."""
        os.write(self.write_fd, f"{os.getpid()}\n".encode())

    def release(self) -> None:
        """The collector settled the command: the watchdog exits without signalling anything."""
        if self.write_fd < 0:
            return
        with contextlib.suppress(OSError):
            os.write(self.write_fd, b"done\n")
        os.close(self.write_fd)
        self.write_fd = -1
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)


def _end_with_the_collector(collector_pid: int, watchdog: Watchdog | None) -> Callable[[], None]:
    """In the child, before exec: SIGINT stops it again, and it never runs on unrecorded. With a
    watchdog, tell it our process group; without one (it could not start), at least SIGTERM the direct
    child when the collector dies (PR_SET_PDEATHSIG, Linux only)."""

    def arm() -> None:
        # A job that a non-interactive shell starts with `&` inherits SIGINT ignored (so that a Ctrl-C
        # meant for the shell's foreground job spares it). The command runs in its own session, out of
        # any keyboard's reach: SIGINT is the collector's "stop gracefully", so it gets its default
        # back. An ignored SIGHUP (nohup) stays ignored.
        with contextlib.suppress(OSError, ValueError):
            signal.signal(signal.SIGINT, signal.SIG_DFL)
        if watchdog is not None:
            watchdog.announce_from_child()
            return
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != collector_pid:  # the collector died before the line above took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return arm


def _group_has_live_member(group: int, proc: Path = Path("/proc")) -> bool:
    try:
        entries = [entry for entry in os.listdir(proc) if entry.isdigit()]
    except OSError:
        return True  # cannot tell: assume it runs
    for entry in entries:
        try:
            fields = (proc / entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue  # gone meanwhile
        if len(fields) > 2 and fields[2] == str(group) and fields[0] not in ("Z", "X"):
            return True
    return False


def exit_status(returncode: int) -> int:
    """A shell-style status: the code itself, or 128+N for death by signal N."""
    return 128 - returncode if returncode < 0 else returncode


class RunningCommand:
    """A started command. Signals go to its whole process group; exit is detected without reaping it,
    so the collector can take a last sample of the finished process before `reap()`."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        log_path: Path,
        echo: bool,
        orphan_grace_s: float = 30.0,
        on_output: Callable[[bytes], None] | None = None,
    ) -> None:
        """`on_output` gets each chunk of output as it is logged (in the output thread), then b"" once at
        its end; an exception in it stops only its own calls (`output_sink_error`)."""
        self._on_output = on_output
        self.output_sink_error: str | None = None
        self._log: IO[bytes] | None = open(log_path, "ab", buffering=0)  # noqa: SIM115
        self._log_path = log_path
        # Output that could not be logged (a full disk): its newest UNWRITTEN_LOG_BYTES, for write_unwritten.
        self.unwritten_log = bytearray()
        self.unwritten_dropped_bytes = 0
        self.watchdog: Watchdog | None = None
        with contextlib.suppress(OSError):
            self.watchdog = Watchdog(orphan_grace_s)
        try:
            self.process = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env={**env, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},  # CUDA numbers GPUs as NVML does
                start_new_session=True,
                close_fds=True,
                preexec_fn=_end_with_the_collector(os.getpid(), self.watchdog),
            )
        except BaseException:
            self._log.close()
            if self.watchdog is not None:
                self.watchdog.release()
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
        try:
            self._pump_chunks()
        finally:
            self._tell_output(b"")

    def _tell_output(self, chunk: bytes) -> None:
        if self._on_output is None:
            return
        try:
            self._on_output(chunk)
        except Exception as exc:
            self._on_output = None
            self.output_sink_error = f"output reader stopped: {type(exc).__name__}: {exc}".splitlines()[0]

    def _pump_chunks(self) -> None:
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
            self._tell_output(chunk)

    def _write_log(self, chunk: bytes) -> None:
        if self._log is None:
            return
        if not self.log_error:
            try:
                while chunk:  # unbuffered: a write may take only part of it as the disk fills up
                    written = self._log.write(chunk)
                    if not written:
                        raise OSError(errno.EIO, "nothing written")
                    chunk = chunk[written:]
            except OSError as exc:
                self.log_error = f"cannot write command.log: {exc.strerror or exc}"
        if chunk:
            self.unwritten_log += chunk
            excess = len(self.unwritten_log) - UNWRITTEN_LOG_BYTES
            if excess > 0:
                del self.unwritten_log[:excess]
                self.unwritten_dropped_bytes += excess

    def write_unwritten(self) -> None:
        """Append what could not be logged (after the collector freed its reserve); best effort."""
        if not self.unwritten_log:
            return
        lost = self.unwritten_dropped_bytes
        note = f"[collect: {lost} bytes of output before this were lost: command.log unwritable]\n"
        with contextlib.suppress(OSError), open(self._log_path, "ab") as log:
            log.write((note.encode() if lost else b"") + bytes(self.unwritten_log))
            self.unwritten_log.clear()

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
        """True while a member of the group runs; zombies (in a container whose init never reaps) do not
        count."""
        try:
            os.killpg(self.pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return _group_has_live_member(self.pid)

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
        if self.watchdog is not None:
            self.watchdog.release()
        if self.process.stdout is not None:
            self.process.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None

    def settle(self, stopped: bool, grace_s: tuple[float, float]) -> None:
        """Reap the command; if the collector ended abnormally, stop it gracefully; if we `stopped` it,
        make sure no child of it is left running. Then close its output."""
        if not self.has_exited():
            # The collector itself failed: as long as SIGINT-then-SIGTERM would have allowed, for a final
            # checkpoint that may have to wait for a slow step.
            self.stop_gracefully(sum(grace_s))
        self.reap()
        if stopped and self.group_alive():
            self.stop_gracefully(grace_s[1])  # stragglers of a command we stopped
        self.finish()

    def stop_gracefully(self, grace_s: float) -> None:
        """SIGTERM to the whole group; SIGKILL to what is left of it after grace_s."""
        self.signal_group(signal.SIGTERM)
        end = time.monotonic() + grace_s
        while time.monotonic() < end:
            if self.has_exited():
                self.reap()
                if not self.group_alive():
                    return
            time.sleep(0.05)
        self.signal_group(signal.SIGKILL)
        self.reap()
