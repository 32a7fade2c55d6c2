"""The busiest single thread of a process, from /proc/<pid>/task/<tid>/stat (utime+stime per thread).

A Python training's main thread can keep one core busy while the kernel moves it between cores, so no
logical CPU reads busy; only the thread's own counters show it. Reading every thread's stat file on every
read would cost more than the rest of the process source (a few µs each, tens of threads per process), so:

- the group's own utime+stime (its /proc/<pid>/stat, which the process source reads anyway) bounds what its
  threads used together: a group that did not move reads no thread;
- threads are read busiest first (by their last rate), and the reads stop once the group's CPU that the
  threads read so far leave unexplained is no more than the busiest one found (or one clock tick, the
  counters' own resolution): the unread threads together cannot have used more than it. A thread skipped in
  a window is read later over the longer span, which gives its mean rate over that span;
- the task/ directory is listed only when the group's thread count differs from the threads known (a thread
  found gone when read counts as known no more), and when asked (the process source asks at each full pass
  over /proc). A thread that replaced another within a window, the count unchanged, is found as soon as it
  is busy: the CPU it adds is unexplained, so every known thread is read, the one that exited among them.

A thread first seen in a window has no base: it counts from the next one. Stat files stay open as
descriptors up to a budget shared by the tree (a quarter of the descriptor limit, at most 512); threads
past it are opened for each read.
"""

from __future__ import annotations

import errno
import os
import resource
from dataclasses import dataclass

MAX_THREAD_FILES = 512
_UTIME, _STIME = 11, 12  # indexes after the ")" that closes the command name
_GONE = (errno.ENOENT, errno.ESRCH)
_STAT_SIZE = 1024  # a task's stat line is about 300 bytes: its name is at most 15


class ThreadsUnreadable(Exception):
    """A live process's task/ directory cannot be listed (permission): its threads are unknown."""


def thread_ticks(data: bytes) -> int:
    """utime+stime of one /proc/<pid>/task/<tid>/stat."""
    fields = data[data.rindex(b")") + 2 :].split(None, _STIME + 1)
    return int(fields[_UTIME]) + int(fields[_STIME])


def thread_file_budget() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return MAX_THREAD_FILES if soft == resource.RLIM_INFINITY else max(0, min(MAX_THREAD_FILES, soft // 4))


class DescriptorBudget:
    """How many more thread stat files the tree may keep open."""

    def __init__(self, files: int) -> None:
        self.left = files


@dataclass(eq=False, slots=True)
class _Thread:
    tid: int
    path: str
    fd: int  # its stat file kept open (as collect.procfs.KernelFile does), -1 past the descriptor budget
    ticks: int
    read_at: float
    rate: float = 0.0  # ticks per second over its last read span: the reading order

    def read(self) -> bytes:
        if self.fd >= 0:
            return os.pread(self.fd, _STAT_SIZE, 0)
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            return os.read(fd, _STAT_SIZE)
        finally:
            os.close(fd)


class ThreadSet:
    """The threads of one process, followed from the first read that lists them."""

    def __init__(self, task_dir: str, budget: DescriptorBudget) -> None:
        self._task_dir = task_dir
        self._budget = budget
        self._threads: dict[int, _Thread] = {}
        self._order: list[_Thread] = []  # the threads with a base, busiest first by their last rate
        self._joining: list[_Thread] = []  # listed in the last call: they join the order in the next
        self._group_ticks: int | None = None
        self.relist = True
        self.reads = 0  # thread stat files read (or found gone), for tests and benches

    @property
    def tids(self) -> list[int]:
        return sorted(self._threads)

    def busiest(self, group_ticks: int, thread_count: int, since: float, now: float) -> float | None:
        """Ticks per second of the busiest thread between `since` (the previous call) and `now`; None when
        no thread had a base (the first call, or only new threads), or the process is gone."""
        moved = None if self._group_ticks is None else group_ticks - self._group_ticks
        self._group_ticks = group_ticks
        order = self._order
        if self._joining:
            order.extend(self._joining)  # rate 0: the order stays sorted
            self._joining = []
        if (self.relist or thread_count != len(self._threads)) and not self._list(now):
            return None
        window = now - since
        if moved is None or window <= 0 or not order:
            return None
        if moved <= 0:
            return 0.0
        best = accounted = 0.0
        read = 0
        gone: list[_Thread] | None = None
        for thread in order:
            if moved - accounted <= max(best * window, 1.0) + 1e-9:
                break
            read += 1
            try:
                data = os.pread(thread.fd, _STAT_SIZE, 0) if thread.fd >= 0 else thread.read()
                fields = data[data.rindex(b")") + 2 :].split(None, _STIME + 1)
                ticks = int(fields[_UTIME]) + int(fields[_STIME])
            except (OSError, ValueError, IndexError):  # exited: its time is in the group's (dead threads')
                gone = [thread] if gone is None else [*gone, thread]
                continue
            span = now - thread.read_at
            rate = (ticks - thread.ticks) / span if span > 0 else 0.0
            thread.ticks, thread.read_at, thread.rate = ticks, now, rate
            accounted += rate * window
            if rate > best:
                best = rate
        self.reads += read
        if gone is not None or read > 1 or (read == 1 and len(order) > 1 and order[0].rate < order[1].rate):
            self._reorder(read, gone)
        return best

    def _reorder(self, read: int, gone: list[_Thread] | None) -> None:
        """Only the first `read` threads have new rates; the rest keep their order."""
        order = self._order
        if gone is not None:
            for thread in gone:
                self._drop(thread)
            order.sort(key=_by_rate, reverse=True)
        else:
            head = sorted(order[:read], key=_by_rate, reverse=True)
            if read < len(order) and head[-1].rate < order[read].rate:
                order.sort(key=_by_rate, reverse=True)
            else:
                order[:read] = head

    def _list(self, now: float) -> bool:
        """Follow the threads the task/ directory lists now (from the next call) and forget the others;
        False when the process is gone."""
        try:
            names = os.listdir(self._task_dir)
        except OSError as error:
            if error.errno in _GONE:
                return False
            raise ThreadsUnreadable(f"{self._task_dir}: {error.strerror}") from error
        self.relist = False
        listed = {int(name) for name in names if name.isdigit()}
        for tid in [tid for tid in self._threads if tid not in listed]:
            self._drop(self._threads[tid])
        for tid in sorted(listed):  # ties in the order (new threads, idle ones) go by tid
            if tid not in self._threads:
                self._follow(tid, now)
        return True

    def _follow(self, tid: int, now: float) -> None:
        path = f"{self._task_dir}/{tid}/stat"
        thread = _Thread(tid, path, -1, 0, now)
        try:
            if self._budget.left > 0:
                thread.fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                self._budget.left -= 1
            thread.ticks = thread_ticks(thread.read())
        except (OSError, ValueError, IndexError):
            self._close(thread)
            return
        self._threads[tid] = thread
        self._joining.append(thread)

    def _drop(self, thread: _Thread) -> None:
        del self._threads[thread.tid]
        if thread in self._joining:
            self._joining.remove(thread)
        else:
            self._order.remove(thread)
        self._close(thread)

    def _close(self, thread: _Thread) -> None:
        if thread.fd >= 0:
            os.close(thread.fd)
            thread.fd = -1
            self._budget.left += 1

    def close(self) -> None:
        for thread in self._threads.values():
            self._close(thread)
        self._threads.clear()
        self._order.clear()
        self._joining.clear()


def _by_rate(thread: _Thread) -> float:
    return thread.rate
