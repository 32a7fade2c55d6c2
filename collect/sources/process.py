"""CPU, resident memory and threads of the launched command's whole process tree, from /proc/<pid>/stat.

Each known process is re-read through a descriptor kept open, every tick. New processes are looked for at
most once a second, and only when the kernel's last-created pid has moved, reading only the
/proc/<pid>/stat of pids created since the previous look; a full pass over /proc runs every 30 s (both
less often where a pass is slow). A process that a look finds late is not lost: CPU time is counted as
utime+stime+cutime+cstime: a child that a tracked parent reaps moves its time into the parent's
counters, so short-lived children are counted in full; a process first seen by a rescan brings the CPU
it used since it started into that row. The busiest single thread of the tree comes from each process's
threads (collect/sources/threads.py). The tree's storage I/O (what it had the disks read and write) comes from
/proc/<pid>/io, counted as its CPU time is: a reaped child's bytes move into its parent's.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from collect.procfs import KernelFile
from collect.sources.base import HELD_PERIOD_S, Reading, Source
from collect.sources.threads import DescriptorBudget, ThreadSet, ThreadsUnreadable, thread_file_budget
from runformat.columns import PROC_READ_BPS, PROC_WRITE_BPS, PROCESS_COLUMNS

MIN_RESCAN_GAP_S = 1.0
FULL_RESCAN_S = 30.0
MAX_SCAN_SHARE = 0.003  # scans back off to stay under 0.3 % of a core (a busy host creates pids all the time)

# Indexes in /proc/<pid>/stat after the ")" that closes the command name (field 3 is index 0).
_PPID, _UTIME, _STIME, _CUTIME, _CSTIME, _THREADS, _RSS = 1, 11, 12, 13, 14, 17, 21
_EXITED_STATES = (b"Z", b"X", b"x")


class StatFields(NamedTuple):
    ppid: int
    cpu_ticks: int
    threads: int
    rss_pages: int
    exited: bool = False  # a zombie (Z) or being reaped (X): its parent's cutime may hold its time already
    own_ticks: int = 0  # utime+stime of its threads, live and exited, without its children's


def parse_stat(data: bytes) -> StatFields:
    fields = data[data.rindex(b")") + 2 :].split(None, _RSS + 1)  # the fields after RSS stay unsplit
    own = int(fields[_UTIME]) + int(fields[_STIME])
    return StatFields(
        int(fields[_PPID]),
        own + int(fields[_CUTIME]) + int(fields[_CSTIME]),
        int(fields[_THREADS]),
        int(fields[_RSS]),
        fields[0] in _EXITED_STATES,
        own,
    )


def parse_io(data: bytes) -> tuple[int, int]:
    """(read_bytes, write_bytes) of /proc/<pid>/io: what the process and the children it reaped had the
    storage layer read and write."""
    found: dict[bytes, int] = {}
    for line in data.splitlines():
        key, _, value = line.partition(b":")
        if key in (b"read_bytes", b"write_bytes"):
            found[key] = int(value)
    return found[b"read_bytes"], found[b"write_bytes"]


NO_IO = (0, 0)


@dataclass
class _Tracked:
    stat: KernelFile
    base_ticks: int
    last: StatFields
    threads: ThreadSet
    io: KernelFile | None = None  # None: its /proc/<pid>/io could not be read
    base_io: tuple[int, int] = NO_IO
    last_io: tuple[int, int] = NO_IO


def read_parent(proc_root: Path, name: str) -> int | None:
    """The parent pid from /proc/<name>/stat; None when the process is gone or the file unreadable."""
    try:
        fd = os.open(f"{proc_root}/{name}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = os.read(fd, 1024)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        return int(data[data.rindex(b")") + 2 :].split(None, 2)[1])
    except (ValueError, IndexError):
        return None


def parent_map(proc_root: Path, newer_than: int = -1) -> dict[int, list[int]]:
    """pid -> child pids, from /proc/<pid>/stat of every process (or only of pids above `newer_than`)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir(proc_root):
        if not name.isdigit() or int(name) <= newer_than:
            continue
        parent = read_parent(proc_root, name)
        if parent is not None:
            children.setdefault(parent, []).append(int(name))
    return children


def last_created_pid(loadavg: bytes) -> bytes:
    """The 5th field of /proc/loadavg: it changes whenever any process or thread is created."""
    return loadavg.rsplit(None, 1)[-1]


class ProcessTreeSource(Source):
    name = "process"
    min_period_s = HELD_PERIOD_S

    def __init__(self, proc_root: Path, thread_files: int | None = None) -> None:
        super().__init__()
        self._proc_root = proc_root
        self._ticks_per_s = os.sysconf("SC_CLK_TCK")
        self._page_size = os.sysconf("SC_PAGE_SIZE")
        self._tracked: dict[int, _Tracked] = {}
        self._retired_ticks = 0
        self._last_ticks = 0
        self._retired_io = NO_IO
        self._last_io: tuple[int, int] | None = None
        self._io_unreadable = False
        self._last_time = 0.0
        self._attached = False
        self._loadavg = KernelFile(proc_root / "loadavg", 128)
        self._scanned_up_to = -1
        self._last_full_scan = self._last_look = 0.0
        self._scan_gap = MIN_RESCAN_GAP_S
        self._full_scan_gap = FULL_RESCAN_S
        self.scans = 0
        self._thread_files = DescriptorBudget(thread_file_budget() if thread_files is None else thread_files)

    def columns(self) -> list[str]:
        return list(PROCESS_COLUMNS)

    @property
    def pids(self) -> list[int]:
        return sorted(self._tracked)

    def attach(self, pid: int) -> None:
        """Follow `pid` and, from now on, every process below it."""
        self._attached = True
        self._track(pid, counted_from_start=True)
        self.rescan()

    def _track(self, pid: int, counted_from_start: bool) -> None:
        if pid in self._tracked:
            return
        try:
            stat = KernelFile(self._proc_root / str(pid) / "stat", 1024)
            fields = parse_stat(stat.read())
        except (OSError, ValueError):
            return
        base = 0 if counted_from_start else fields.cpu_ticks
        threads = ThreadSet(f"{self._proc_root}/{pid}/task", self._thread_files)
        tracked = self._tracked[pid] = _Tracked(stat, base, fields, threads)
        if self._io_unreadable:
            return
        try:
            tracked.io = KernelFile(self._proc_root / str(pid) / "io", 512)
            tracked.last_io = parse_io(tracked.io.read())
        except (OSError, ValueError, KeyError) as error:
            if tracked.io is not None:
                tracked.io.close()
                tracked.io = None
            self._io_unreadable = True  # the tree's I/O is unknown from now on: partial is not whole
            self.note_once(f"{PROC_READ_BPS}, {PROC_WRITE_BPS}: /proc/<pid>/io unreadable ({error})")
            return
        tracked.base_io = NO_IO if counted_from_start else tracked.last_io

    def rescan(self, now: float | None = None, full: bool = True) -> None:
        """Find new descendants. Pids are handed out in increasing order until they wrap around, so
        between full scans it is enough to look at the pids created since the previous scan."""
        started = time.perf_counter()
        previous_last = self._scanned_up_to
        last = int(last_created_pid(self._loadavg.read()))
        wrapped = last < previous_last
        children = parent_map(self._proc_root, -1 if full or wrapped else previous_last)

        def born_since_last_scan(pid: int) -> bool:
            return pid > previous_last or (wrapped and pid <= last)

        pending = list(self._tracked)
        while pending:
            for child in children.get(pending.pop(), []):
                if child not in self._tracked:
                    # Born since the last scan: none of its CPU time has been counted anywhere yet.
                    self._track(child, counted_from_start=born_since_last_scan(child))
                    pending.append(child)
        self._scanned_up_to = last
        self.scans += 1
        cost = time.perf_counter() - started
        now = time.monotonic() if now is None else now
        if full:
            for tracked in self._tracked.values():
                tracked.threads.relist = True
            self._last_full_scan = now
            self._full_scan_gap = max(FULL_RESCAN_S, cost / MAX_SCAN_SHARE)
        else:
            self._scan_gap = max(MIN_RESCAN_GAP_S, cost / MAX_SCAN_SHARE)
        self._last_look = now

    def maintain(self, now: float) -> None:
        if not self._tracked or now - self._last_look < self._scan_gap:
            return
        self._last_look = now  # whether or not a pid was created since: no look before the gap is over
        if now - self._last_full_scan >= self._full_scan_gap:
            self.rescan(now, full=True)
        elif int(last_created_pid(self._loadavg.read())) != self._scanned_up_to:
            self.rescan(now, full=False)

    def _forget(self, pid: int) -> None:
        tracked = self._tracked.pop(pid)
        tracked.stat.close()
        tracked.threads.close()
        if tracked.io is not None:
            tracked.io.close()
        read, write = self._retired_io
        base_read, base_write = tracked.base_io
        if tracked.last.ppid in self._tracked:
            # Its parent reaps it: the parent's cutime/cstime (and I/O) grow by the child's whole total.
            self._retired_ticks -= tracked.base_ticks
            self._retired_io = (read - base_read, write - base_write)
        else:
            self._retired_ticks += tracked.last.cpu_ticks - tracked.base_ticks
            last_read, last_write = tracked.last_io
            self._retired_io = (read + last_read - base_read, write + last_write - base_write)

    def _refresh(self) -> tuple[int, int, int, int]:
        """(live processes, CPU ticks so far, rss pages, threads)."""
        ticks = self._retired_ticks
        rss_pages = threads = 0
        gone = None
        for pid, tracked in self._tracked.items():
            try:
                last = tracked.last = parse_stat(tracked.stat.read())
            except (OSError, ValueError):
                gone = [pid] if gone is None else [*gone, pid]
                continue
            ticks += self._counted(tracked)
            rss_pages += last.rss_pages
            threads += last.threads
        if gone is not None:
            for pid in gone:
                self._forget(pid)
            ticks = self._retired_ticks + sum(self._counted(t) for t in self._tracked.values())
        return len(self._tracked), ticks, rss_pages, threads

    def _counted(self, tracked: _Tracked) -> int:
        """What a process adds to the tree's CPU total. An exited child whose parent is followed counts
        through that parent only: the kernel marks a child being reaped dead (X), then adds its time to the
        parent's cutime, then releases it, so reading both would count the child twice, and the
        highest-total rule would keep it. Before the reap that is a dip, which that rule absorbs."""
        last = tracked.last
        if last.exited and last.ppid in self._tracked:
            return -tracked.base_ticks
        return last.cpu_ticks - tracked.base_ticks

    def _io_total(self) -> tuple[int, int] | None:
        """(read, write) bytes of the tree so far, counted as _counted counts CPU; None where a process's
        /proc/<pid>/io could not be read (a process gone since the refresh keeps its last reading)."""
        if self._io_unreadable:
            return None
        read, write = self._retired_io
        for tracked in self._tracked.values():
            if tracked.io is None:
                return None
            with contextlib.suppress(OSError, ValueError, KeyError):
                tracked.last_io = parse_io(tracked.io.read())
            base_read, base_write = tracked.base_io
            if tracked.last.exited and tracked.last.ppid in self._tracked:
                read, write = read - base_read, write - base_write
            else:
                read += tracked.last_io[0] - base_read
                write += tracked.last_io[1] - base_write
        return read, write

    def _io_rates(self, elapsed: float) -> tuple[int | None, int | None]:
        """Bytes/s read and written by the tree since the last sample; a total only grows (a reap's dip,
        as for CPU time, is absorbed by keeping the highest)."""
        total, last = self._io_total(), self._last_io
        if total is None:
            self._last_io = None
            return None, None
        self._last_io = (max(total[0], last[0]), max(total[1], last[1])) if last is not None else total
        if last is None or elapsed <= 0:
            return None, None
        return round(max(0, total[0] - last[0]) / elapsed), round(max(0, total[1] - last[1]) / elapsed)

    def _busiest_thread_pct(self, since: float, now: float) -> float | None:
        """CPU of the tree's busiest thread since `since` (100 = one core); None where no thread of a live
        process had a base, or one process's threads were unreadable."""
        busiest: float | None = None
        unreadable = False
        for tracked in self._tracked.values():
            last = tracked.last
            if last.exited:
                continue
            try:
                rate = tracked.threads.busiest(last.own_ticks, last.threads, since, now)
            except ThreadsUnreadable as error:
                self.note_once(f"proc_busiest_thread_pct: {error}")
                unreadable = True
                continue
            if rate is not None and (busiest is None or rate > busiest):
                busiest = rate
        if busiest is None or unreadable:
            return None
        return round(busiest / self._ticks_per_s * 100.0, 1)

    def prime(self, now: float) -> None:
        _, self._last_ticks, _, _ = self._refresh()
        self._last_io = self._io_total()
        self._busiest_thread_pct(now, now)  # the threads' bases
        self._last_time = now

    def sample(self, now: float) -> Reading:
        if not self._attached:
            return dict.fromkeys(self.columns())
        live, ticks, rss_pages, threads = self._refresh()
        busiest_pct = self._busiest_thread_pct(self._last_time, now)
        elapsed = now - self._last_time
        read_bps, write_bps = self._io_rates(elapsed)
        cpu_pct = None
        if elapsed > 0:
            cpu_pct = round(max(0, ticks - self._last_ticks) / self._ticks_per_s / elapsed * 100.0, 1)
        # CPU time only grows; a dip is a parent that reaped a child between the reads of one refresh (the
        # child gone, the parent's cutime not grown yet). Keeping the highest total counts the child once.
        self._last_ticks, self._last_time = max(ticks, self._last_ticks), now
        if not live:
            return {
                "proc_cpu_pct": cpu_pct,
                "proc_rss_bytes": None,
                "proc_threads": None,
                "proc_busiest_thread_pct": None,
                PROC_READ_BPS: read_bps,
                PROC_WRITE_BPS: write_bps,
            }
        return {
            "proc_cpu_pct": cpu_pct,
            "proc_rss_bytes": rss_pages * self._page_size,
            "proc_threads": threads,
            "proc_busiest_thread_pct": busiest_pct,
            PROC_READ_BPS: read_bps,
            PROC_WRITE_BPS: write_bps,
        }

    def close(self) -> None:
        self._loadavg.close()
        for tracked in self._tracked.values():
            tracked.stat.close()
            tracked.threads.close()
            if tracked.io is not None:
                tracked.io.close()
        self._tracked.clear()
