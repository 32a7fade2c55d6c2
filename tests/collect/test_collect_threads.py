"""proc_busiest_thread_pct: the busiest single thread of the followed tree, from /proc/<pid>/task/<tid>/stat,
against fake /proc trees (exact arithmetic, what is read) and against real threads."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from collect.sources.process import FULL_RESCAN_S, ProcessTreeSource
from collect.sources.threads import thread_ticks

COLUMN = "proc_busiest_thread_pct"


def _stat_line(pid: int, name: str, ppid: int, utime: int, threads: int = 1, state: str = "S") -> str:
    fields = f"{ppid} {pid} {pid} 0 -1 0 0 0 0 0 {utime} 0 0 0 20 0 {threads} 0 100 1000 250 0"
    return f"{pid} ({name}) {state} {fields}\n"


class FakeProcess:
    """A process of a fake /proc: its group stat (own ticks = its threads' plus those of exited threads)
    and task/<tid>/stat per thread, as the kernel shows them."""

    def __init__(self, proc: Path, pid: int, ppid: int = 1) -> None:
        self.proc, self.pid, self.ppid = proc, pid, ppid
        self.ticks: dict[int, int] = {}
        self.dead_ticks = 0

    def set(self, **ticks: int) -> None:
        """t<tid>=ticks so far; threads not named keep theirs."""
        for name, value in ticks.items():
            self.ticks[int(name[1:])] = value
        self.write()

    def add(self, **ticks: int) -> None:
        self.set(**{name: self.ticks[int(name[1:])] + value for name, value in ticks.items()})

    def exit_thread(self, tid: int) -> None:
        """Its stat reads as nothing through a kept descriptor (the kernel's ESRCH), and task/ forgets it."""
        self.dead_ticks += self.ticks.pop(tid)
        stat = self.proc / str(self.pid) / "task" / str(tid) / "stat"
        stat.write_text("")
        shutil.rmtree(stat.parent)
        self.write()

    def write(self) -> None:
        own = sum(self.ticks.values()) + self.dead_ticks
        root = self.proc / str(self.pid)
        root.mkdir(parents=True, exist_ok=True)
        (root / "stat").write_text(_stat_line(self.pid, "python3", self.ppid, own, len(self.ticks)))
        for tid, value in self.ticks.items():
            (root / "task" / str(tid)).mkdir(parents=True, exist_ok=True)
            name = "python3" if tid == self.pid else f"pt (data) {tid}"  # spaces and parens, as names can
            (root / "task" / str(tid) / "stat").write_text(_stat_line(tid, name, self.ppid, value))


def _tree(
    tmp_path: Path, thread_files: int | None = None, **ticks: int
) -> tuple[ProcessTreeSource, FakeProcess]:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "loadavg").write_text("0.00 0.00 0.00 1/100 300\n")
    process = FakeProcess(tmp_path, 100)
    process.set(**ticks)
    source = ProcessTreeSource(tmp_path, thread_files=thread_files)
    source.attach(100)
    return source, process


def _reads(source: ProcessTreeSource) -> int:
    return sum(tracked.threads.reads for tracked in source._tracked.values())


def _pct(source: ProcessTreeSource, ticks: int, seconds: float) -> float:
    return round(ticks / source._ticks_per_s / seconds * 100.0, 1)


def test_thread_ticks_are_utime_plus_stime_after_an_odd_name() -> None:
    line = b"7 (a) b (c)) R 1 7 7 0 -1 0 0 0 0 0 31 12 900 900 20 0 1 0 5 10 2 0\n"
    assert thread_ticks(line) == 43  # children's time (900) belongs to the process, never to a thread


def test_the_busiest_thread_over_the_window(tmp_path: Path) -> None:
    source, process = _tree(tmp_path, t100=50, t101=10, t102=0)
    assert COLUMN in source.columns()
    source.prime(0.0)
    process.add(t100=8, t101=3)
    reading = source.sample(0.1)
    assert reading[COLUMN] == _pct(source, 8, 0.1) == 80.0
    assert reading["proc_cpu_pct"] == 110.0  # the tree: two threads' 11 ticks
    process.add(t100=2)
    assert source.sample(0.3)[COLUMN] == _pct(source, 2, 0.2) == 10.0  # over the time since the last read
    source.close()


def test_reads_stop_once_the_unread_threads_cannot_beat_the_busiest(tmp_path: Path) -> None:
    """Threads are read busiest first; once the group's CPU the reads leave unexplained is no more than the
    busiest found, the rest cannot beat it and stay unread (pinned at that boundary)."""
    source, process = _tree(tmp_path, t100=0, t101=0, t102=0)
    source.prime(0.0)
    process.add(t100=9)
    assert source.sample(0.1)[COLUMN] == 90.0  # the order is now t100 first
    reads = _reads(source)
    process.add(t100=5, t101=5)  # 5 unexplained after t100's 5: t101 cannot beat it
    assert source.sample(0.2)[COLUMN] == 50.0 and _reads(source) == reads + 1
    process.add(t100=5, t101=6)  # 6 unexplained after t100's 5, more than 5: read on
    # t101, unread since the start, counts at its mean since then (11 ticks in 0.3 s): in the window it missed
    # it could not have been the busiest
    assert source.sample(0.3)[COLUMN] == 50.0 and _reads(source) == reads + 3
    assert [round(thread.rate, 1) for thread in source._tracked[100].threads._order] == [50.0, 36.7, 0.0]
    process.add(t101=9, t102=1)  # t100 idle, t101 busy: after both, 1 tick left, the counters' resolution
    assert source.sample(0.4)[COLUMN] == 90.0 and _reads(source) == reads + 5
    assert [thread.tid for thread in source._tracked[100].threads._order] == [101, 100, 102]
    process.add(t100=0)
    assert source.sample(0.5)[COLUMN] == 0.0 and _reads(source) == reads + 5  # the group did not move
    process.add(t100=1)
    assert source.sample(0.6)[COLUMN] == 0.0 and _reads(source) == reads + 5  # one tick: not read
    source.close()


def test_a_thread_first_seen_counts_from_the_next_window(tmp_path: Path) -> None:
    source, process = _tree(tmp_path, t100=0, t101=0)
    source.prime(0.0)
    process.add(t100=3)
    process.set(t103=500)  # created since: 5 s of CPU that this window cannot hold
    assert source.sample(0.1)[COLUMN] == 30.0
    assert 103 in source._tracked[100].threads.tids
    process.add(t100=3, t103=9)
    assert source.sample(0.2)[COLUMN] == 90.0
    source.close()


def test_a_thread_that_replaced_another_within_a_window_is_found(tmp_path: Path) -> None:
    """The thread count alone cannot show it. Busy, the CPU it adds is unexplained, so every known thread is
    read, the one that exited with them: the count no longer matches. Idle, the next full pass finds it."""
    source, process = _tree(tmp_path, t100=0, t101=0, t102=0)
    source.prime(0.0)
    process.exit_thread(101)
    process.set(t104=0)  # the count stays 3
    process.add(t100=2, t104=7)
    assert source.sample(0.1)[COLUMN] == 20.0  # t104 unknown yet: 7 ticks unexplained, every thread read
    assert source._tracked[100].threads.tids == [100, 102]  # t101 among them, found gone
    process.add(t104=7)
    assert source.sample(0.2)[COLUMN] == 0.0  # listed now; it counts from the next window
    process.add(t104=8)
    assert source.sample(0.3)[COLUMN] == 80.0
    reads = _reads(source)
    process.add(t104=8)
    assert source.sample(0.4)[COLUMN] == 80.0 and _reads(source) == reads + 1

    process.exit_thread(102)
    process.set(t105=0)  # idle: nothing unexplained
    process.add(t104=8)
    now = time.monotonic() + FULL_RESCAN_S
    source.maintain(now)  # a full pass: each task/ listed again at the next read
    source.sample(now)
    assert source._tracked[100].threads.tids == [100, 104, 105]
    source.close()


def test_exited_threads_are_dropped_with_their_descriptors(tmp_path: Path) -> None:
    source, process = _tree(tmp_path, thread_files=10, t100=0, t101=0, t102=0, t103=0)
    source.prime(0.0)
    assert source._thread_files.left == 6
    process.exit_thread(103)  # the count drops: the next read lists task/ again
    process.add(t101=4)
    assert source.sample(0.1)[COLUMN] == 40.0
    assert source._tracked[100].threads.tids == [100, 101, 102] and source._thread_files.left == 7
    process.add(t102=6, t101=5)  # t102 busy, then gone between the group's read and its own: dropped
    (tmp_path / "100/task/102/stat").write_text("")
    assert source.sample(0.2)[COLUMN] == 50.0  # its 6 ticks are the group's, no thread's
    assert 102 not in source._tracked[100].threads.tids and source._thread_files.left == 8
    source.close()
    assert source._thread_files.left == 10


def test_past_the_descriptor_budget_threads_are_opened_for_each_read(tmp_path: Path) -> None:
    source, process = _tree(tmp_path, thread_files=1, t100=0, t101=0, t102=0)
    source.prime(0.0)
    assert source._thread_files.left == 0
    process.add(t100=1, t101=2, t102=7)
    assert source.sample(0.1)[COLUMN] == 70.0
    process.add(t101=8)
    assert source.sample(0.2)[COLUMN] == 80.0
    source.close()
    assert source._thread_files.left == 1


def test_the_busiest_thread_of_the_whole_tree(tmp_path: Path) -> None:
    (tmp_path / "loadavg").write_text("0.00 0.00 0.00 1/100 300\n")
    parent, child = FakeProcess(tmp_path, 100), FakeProcess(tmp_path, 200, ppid=100)
    parent.set(t100=0, t101=0)
    child.set(t200=0, t201=0)
    source = ProcessTreeSource(tmp_path)
    source.attach(100)
    assert source.pids == [100, 200]
    source.prime(0.0)
    parent.add(t100=6, t101=4)
    child.add(t201=9)
    reading = source.sample(0.1)
    assert reading[COLUMN] == 90.0 and reading["proc_cpu_pct"] == 190.0
    source.close()


def test_unknown_is_an_empty_cell_never_zero(tmp_path: Path) -> None:
    source, process = _tree(tmp_path / "a", t100=0)
    unattached = ProcessTreeSource(tmp_path / "a")
    assert unattached.sample(0.0)[COLUMN] is None  # sampling only: no command
    unattached.close()
    assert source.sample(0.1)[COLUMN] is None  # no thread has a base yet (never primed)
    process.add(t100=2)
    assert source.sample(0.2)[COLUMN] == 20.0
    (tmp_path / "a/100/stat").write_text(_stat_line(100, "python3", 1, 2, 1, state="Z"))
    assert source.sample(0.3)[COLUMN] is None  # a zombie: its threads are gone
    (tmp_path / "a/100/stat").write_text("")
    assert source.sample(0.4)[COLUMN] is None  # the tree exited
    source.close()

    root = tmp_path / "b"
    write_process = FakeProcess(root, 100)
    write_process.write()
    (root / "loadavg").write_text("0.00 0.00 0.00 1/100 300\n")
    (root / "100/task").write_text("")  # a task/ that cannot be listed (root reads any mode: not a folder)
    unreadable = ProcessTreeSource(root)
    unreadable.attach(100)
    unreadable.prime(0.0)
    assert unreadable.sample(0.1)[COLUMN] is None
    assert any(note.startswith(f"{COLUMN}: ") for note in unreadable.notes())
    unreadable.close()


def _cpu_seconds_by_thread(pid: int) -> dict[int, float]:
    return {thread.id: thread.user_time + thread.system_time for thread in psutil.Process(pid).threads()}


BUSY_AND_IDLE = r"""
import sys, threading, time
def burn():
    while True:
        pass
def short_lived():
    time.sleep(0.3)
for target in [burn, lambda: time.sleep(60)] + [short_lived] * 8:
    threading.Thread(target=target, daemon=True).start()
print("started", flush=True)
time.sleep(60)
"""


def test_a_real_busy_thread_reads_as_one_core_and_exited_threads_are_let_go() -> None:
    process = subprocess.Popen([sys.executable, "-c", BUSY_AND_IDLE], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "started"
        source = ProcessTreeSource(Path("/proc"), thread_files=100)
        source.attach(process.pid)
        start = time.monotonic()
        source.prime(start)
        before = _cpu_seconds_by_thread(process.pid)
        busiest, total = [], []
        for _ in range(10):  # a second at the held period
            time.sleep(0.1)
            now = time.monotonic()
            reading = source.sample(now)
            source.maintain(now)
            busiest.append(reading[COLUMN])
            total.append(reading["proc_cpu_pct"])
        after = _cpu_seconds_by_thread(process.pid)
        mean_busiest, mean_total = sum(busiest) / len(busiest), sum(total) / len(total)
        assert mean_total <= 130.0 and mean_busiest >= mean_total - 10.0  # the rest of the tree idles
        # how much CPU the busy thread got depends on the machine's load: what it got, psutil says
        psutil_busiest = max(after[tid] - before.get(tid, 0.0) for tid in after) / (now - start) * 100.0
        assert psutil_busiest >= 20.0  # it ran: a busy thread, not an idle one
        assert mean_busiest == pytest.approx(psutil_busiest, abs=10.0)
        live = sorted(int(tid) for tid in os.listdir(f"/proc/{process.pid}/task"))
        assert len(live) == 3  # the main thread, the busy one, the idle one
        assert source._tracked[process.pid].threads.tids == live
        assert source._thread_files.left == 100 - 3
        source.close()
    finally:
        process.kill()
        process.wait()
