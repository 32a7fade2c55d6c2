"""How a recording stops its command, and which signals stop the collector itself.

The command is stopped like a person would: SIGINT, wait, SIGTERM, wait, SIGKILL, each to its whole
process group. A signal the command ignores is skipped (read from /proc/PID/status), so a command that
ignores SIGINT gets SIGTERM at once instead of after the whole SIGINT grace period.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

# What stops the collector itself (Ctrl-C, kill, a hang-up).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
SAME_STOP_WINDOW_S = 1.0  # Slurm signals every process of a job at once, srun passes it on: one stop


class Signallable(Protocol):
    pid: int

    def signal_group(self, signum: int) -> None: ...


def ignored_signals(pid: int, proc_root: Path = Path("/proc")) -> set[int]:
    """The signals process `pid` ignores (SigIgn in /proc/PID/status); empty if that cannot be read."""
    try:
        status = (proc_root / str(pid) / "status").read_text()
    except OSError:
        return set()
    for line in status.splitlines():
        if line.startswith("SigIgn:"):
            try:
                mask = int(line.split(":", 1)[1].strip(), 16)
            except ValueError:
                return set()
            return {bit + 1 for bit in range(mask.bit_length()) if mask >> bit & 1}
    return set()


class Stopper:
    """Stops the command: SIGINT, wait, SIGTERM, wait, SIGKILL, skipping what the command ignores."""

    def __init__(
        self,
        command: Signallable | None,
        grace_s: tuple[float, float],
        say: Callable[[str], None] = lambda _line: None,
        proc_root: Path = Path("/proc"),
    ) -> None:
        self._command = command
        self._stages = [(signal.SIGINT, grace_s[0]), (signal.SIGTERM, grace_s[1]), (signal.SIGKILL, None)]
        self._say = say
        self._proc_root = proc_root
        self.reason: str | None = None
        self.stage = -1
        self.next_at: float | None = None
        self.requested_at = 0.0
        self.sent: list[str] = []  # the signals sent to the command's group, in order
        self.skipped: list[str] = []  # stages skipped because the command ignored that signal

    def request(self, reason: str, now: float) -> None:
        if self.reason is None:
            self.reason, self.requested_at = reason, now
            self.advance(now)
        elif reason == "interrupted" and now - self.requested_at >= SAME_STOP_WINDOW_S:
            self.advance(now)  # asking again (a second Ctrl-C) skips the rest of the grace period

    def advance(self, now: float) -> None:
        if self._command is None or self.stage + 1 >= len(self._stages):
            self.next_at = None
            return
        self.stage += 1
        ignored = ignored_signals(self._command.pid, self._proc_root)
        skipped_now = []
        while self.stage + 1 < len(self._stages) and self._stages[self.stage][0] in ignored:
            skipped_now.append(signal.Signals(self._stages[self.stage][0]).name)
            self.stage += 1
        self.skipped += skipped_now
        signum, grace = self._stages[self.stage]
        name = signal.Signals(signum).name
        because = f"; it ignores {' and '.join(skipped_now)}" if skipped_now else ""
        self._say(f"collect: {name} to the command ({self.reason}{because})")
        self._command.signal_group(signum)
        self.sent.append(name)
        self.next_at = None if grace is None else now + grace

    def add_to_record(self, record: dict[str, Any]) -> None:
        """run.json: the signals sent (sampler.stop_signals), and a note for each one skipped."""
        if self.sent:
            record["sampler"]["stop_signals"] = list(self.sent)
        if self.skipped:
            ignored = " and ".join(self.skipped)
            record["notes"] = [*record.get("notes", []), f"the command ignored {ignored}: not sent"]

    def due(self, now: float) -> bool:
        return self.next_at is not None and now >= self.next_at


@contextlib.contextmanager
def stop_signals_caught(handler: Callable[[int, object], None], wakeup_fd: int) -> Iterator[None]:
    """`handler` for STOP_SIGNALS (and a byte on `wakeup_fd` for each) while inside; main thread only.

    A signal ignored when we started stays ignored: SIGHUP under nohup, so a detached run survives the
    end of the login session that started it; SIGINT in a job that a non-interactive shell started with
    `&` (the collector still stops on SIGTERM).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = [signum for signum in STOP_SIGNALS if signal.getsignal(signum) != signal.SIG_IGN]
    previous = {signum: signal.signal(signum, handler) for signum in caught}
    previous_wakeup = signal.set_wakeup_fd(wakeup_fd, warn_on_full_buffer=False)
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous_wakeup)
        for signum, old in previous.items():
            signal.signal(signum, old)
