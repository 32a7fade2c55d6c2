"""What the collector costs, measured in one run on this machine, against the shell tools it replaces.

1. The headline: the collector's own CPU per tick, as it really runs: `python -m collect run` recording a
   4-process command at 10 ms and at 1 s, its process's CPU time (every thread, from
   /proc/PID/task/*/schedstat) between two rows of its telemetry.csv, divided by the ticks between them.
   Under it, the floor at 10 ms: a bare Python loop on the same deadlines that only wakes; that also writes
   one row; that also reads /proc/stat, meminfo, diskstats and net/dev; and that also reads the tree's
   /proc/PID/stat, parsing nothing: what this machine charges whatever the collector's code does. Below
   0.1 s the collector reads those files every 0.1 s only (docs/run-format.md), so its floor is a row per
   tick plus a tenth of the reads.
2. Where a tick's CPU goes, in a real session at 10 ms with a live progress line over a training.csv that
   grows (as `collect timed` runs): each source's sample, writing the row (one write per row), the
   progress line (including reading the training's progress), housekeeping (process-tree rescans) and the
   loop itself (waiting, signals, lateness), from the sampling thread's CPU clock.
3. CPU per full sample (all sources + the process tree + one CSV row) in a tight loop, which a real tick
   never sees (its caches are cold after sleeping), and the same sample done with psutil, as a baseline.
4. Real sessions (collect.session.run_session) at 1 s, 0.1 s (with one other core kept busy) and 0.01 s:
   lateness p50/p99 from telemetry.csv, and at 0.01 s whether any deadline was missed.
5. `--prometheus`: what handing each row to the exposition adds to a tick (it keeps references only), and
   what building one /metrics answer costs (in the HTTP server's thread, once per scrape, not per tick).
6. The old approach: spawn `mpstat -P ALL 1 1`, `iostat -x 1 1`, `free -m`, `sensors` every second
   (those installed), CPU of those children per sampled second.

Last line: cpu_ms_per_tick_10ms=<x> cpu_ms_per_tick_1s=<y> late_p99_ms_at_100ms=<z> ratio_vs_shell=<r>
cpu_ms_per_tick_* = the collector's own CPU per tick at that interval (1. above); ratio_vs_shell = shell
CPU per sampled second / the collector's CPU per tick at 1 s (everything included).
Other work on the machine inflates the CPU figures (cold caches, contention): the load average is printed
at the start and the end; compare figures taken on a quiet machine.

Usage: python bench/sampler_overhead.py [--scale 1.0]   (--scale 0.2 for a quick look; ~2.5 min at 1.0)
       python bench/sampler_overhead.py --quick         (--scale 0.05: seconds, what the tests run)
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from sampler.tick_cost import collector_cpu_per_tick, print_breakdown, tick_breakdown
from sampler.tick_floor import tick_floor_ms

from collect.session import SessionOptions, run_session
from collect.sources import Hardware, build_sources
from collect.sources.base import HELD_PERIOD_S
from collect.sources.process import parent_map
from collect.writer import TelemetryWriter

SHELL_TOOLS = (
    ["mpstat", "-P", "ALL", "1", "1"],
    ["iostat", "-x", "1", "1"],
    ["free", "-m"],
    ["sensors"],
)
TREE_COMMAND = ["/bin/sh", "-c", "sleep 600 & sleep 600 & sleep 600 & wait"]


def start_tree() -> subprocess.Popen[bytes]:
    return subprocess.Popen(TREE_COMMAND, start_new_session=True)


def stop_tree(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def tight_loop_ms(samples: int, workdir: Path) -> tuple[float, dict[str, float], float, int]:
    """(ms CPU per full sample, µs per source, ms per rescan, processes followed)."""
    tree = start_tree()
    time.sleep(0.2)
    sources = build_sources(Hardware(), follow_command=True)
    sources.process.attach(tree.pid)
    followed = len(sources.process.pids)
    writer = TelemetryWriter(workdir / "tight.csv", ["time_unix", "elapsed_s", "late_ms", *sources.columns()])
    sources.prime(time.monotonic())
    start_cpu = time.process_time()
    for _ in range(samples):
        now = time.monotonic()
        row: dict[str, float | None] = {"time_unix": time.time(), "elapsed_s": 0.0, "late_ms": 0.0}
        sources.sample_into(row, now)
        writer.write(row)
    per_sample_ms = (time.process_time() - start_cpu) / samples * 1000.0
    per_source = {}
    for source in sources.sources:
        started = time.process_time()
        for _ in range(samples // 3):
            source.sample(time.monotonic())
        per_source[source.name] = (time.process_time() - started) / (samples // 3) * 1e6
    started = time.process_time()
    for _ in range(20):
        sources.process.rescan()
    rescan_ms = (time.process_time() - started) / 20 * 1000.0
    writer.close()
    sources.close()
    stop_tree(tree)
    return per_sample_ms, per_source, rescan_ms, followed


def psutil_sample_ms(samples: int, workdir: Path) -> float:
    """The same columns the straightforward way, with psutil (re-reading the tree each tick is left out)."""
    tree = start_tree()
    time.sleep(0.2)
    processes = [psutil.Process(tree.pid), *psutil.Process(tree.pid).children(recursive=True)]
    with open(workdir / "psutil.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        psutil.cpu_percent(percpu=True)
        started = time.process_time()
        for _ in range(samples):
            row: list[object] = [time.time(), *psutil.cpu_percent(percpu=True), psutil.getloadavg()[0]]
            freq = psutil.cpu_freq()
            vm, swap = psutil.virtual_memory(), psutil.swap_memory()
            disk, net = psutil.disk_io_counters(perdisk=True), psutil.net_io_counters()
            temps = psutil.sensors_temperatures()
            row += [
                freq.current if freq else "",
                vm.used,
                vm.percent,
                swap.used,
                len(disk),
                net.bytes_recv,
                len(temps),
            ]
            for process in processes:
                with process.oneshot():
                    row += [sum(process.cpu_times()[:4]), process.memory_info().rss, process.num_threads()]
            writer.writerow(row)
            handle.flush()
        cost = (time.process_time() - started) / samples * 1000.0
    stop_tree(tree)
    return cost


def prometheus_costs(samples: int, workdir: Path) -> tuple[float, float, int]:
    """(ms the exposition adds per tick, ms per /metrics answer, its bytes), with this machine's sources."""
    from prometheus_client import generate_latest

    from collect.exposition import PrometheusExposition

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sources = build_sources(Hardware(), follow_command=False)
    exposition = PrometheusExposition(f"127.0.0.1:{port}")
    record = {"run_id": "bench", "host": socket.gethostname(), "device": "cpu", "label": "", "command": None}
    try:
        exposition.start(workdir, record, sources)
        sources.prime(time.monotonic())
        in_tick_ns = 0
        for _ in range(samples):
            row: dict[str, float | None] = {"time_unix": time.time(), "elapsed_s": 0.0, "late_ms": 0.0}
            sources.sample_into(row, time.monotonic())
            started = time.perf_counter_ns()
            exposition.tick(row)
            in_tick_ns += time.perf_counter_ns() - started
        scrapes = max(20, samples // 20)
        started_cpu = time.process_time()
        for _ in range(scrapes):
            answer = generate_latest(exposition.registry)
        scrape_ms = (time.process_time() - started_cpu) / scrapes * 1000.0
    finally:
        exposition.close()
        sources.close()
    return in_tick_ns / samples / 1e6, scrape_ms, len(answer)


def session_run(interval_s: float, duration_s: float, workdir: Path) -> dict[str, float]:
    """A real recording of a 4-process command; lateness from the CSV, CPU from our own process time."""
    cpu_at_row: list[float] = []
    options = SessionOptions(
        data_dir=workdir,
        interval_s=interval_s,
        duration_s=duration_s,
        command=TREE_COMMAND,
        echo_output=False,
        stop_grace_s=(2.0, 2.0),
    )
    result = run_session(options, on_sample=lambda _row: cpu_at_row.append(time.process_time()))
    with open(result.run_dir / "telemetry.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    late = sorted(float(r["late_ms"]) for r in rows if r["late_ms"])
    skipped = sum(int(r["skipped_ticks"]) for r in rows)
    steady = cpu_at_row[1:]
    cpu_per_tick_ms = (steady[-1] - steady[0]) / (len(steady) - 1) * 1000.0 if len(steady) > 1 else math.nan
    return {
        "rows": len(rows),
        "expected": round(duration_s / interval_s) + 1,
        "skipped": skipped,
        "late_p50_ms": late[len(late) // 2],
        "late_p99_ms": late[min(len(late) - 1, int(0.99 * len(late)))],
        "late_max_ms": late[-1],
        "cpu_per_tick_ms": cpu_per_tick_ms,
        "core_pct": cpu_per_tick_ms / (interval_s * 1000.0) * 100.0,
    }


def shell_ms_per_second(seconds: int) -> tuple[float, list[str]]:
    """CPU of the spawned tools per sampled second (children's rusage), tools run side by side each second."""
    tools = [tool for tool in SHELL_TOOLS if shutil.which(tool[0])]
    if not tools:
        return math.nan, []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(seconds):
        second_started = time.monotonic()
        running = [subprocess.Popen(t, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for t in tools]
        for process in running:
            process.wait()
        time.sleep(max(0.0, 1.0 - (time.monotonic() - second_started)))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu_s / seconds * 1000.0, [t[0] for t in tools]


def floor_beside_a_tree(duration_s: float, workdir: Path) -> tuple[dict[str, float], int]:
    """The floor at 10 ms, reading the /proc/PID/stat of a running TREE_COMMAND's processes (and how many)."""
    tree = start_tree()
    time.sleep(0.2)
    sources = build_sources(Hardware(), follow_command=True)
    try:
        sources.process.attach(tree.pid)
        pids = sources.process.pids
        return tick_floor_ms(0.01, duration_s, pids, workdir), len(pids)
    finally:
        sources.close()
        stop_tree(tree)


def print_floor(floor: dict[str, float], processes: int, real_10ms: float) -> None:
    reads_every = round(HELD_PERIOD_S / 0.01)  # at 10 ms the kernel files are read on one tick in this many
    same_work = floor["write"] + (floor["all"] - floor["write"]) / reads_every
    print(
        f"  the floor under it at 10 ms, a bare Python loop parsing nothing: waking on the deadline "
        f"{floor['wake']:.3f} ms; + writing one row {floor['write']:.3f} ms; + reading /proc/stat, meminfo, "
        f"diskstats, net/dev {floor['system']:.3f} ms; + the tree's {processes} /proc/PID/stat "
        f"{floor['all']:.3f} ms. The collector reads those on one tick in {reads_every} (held sources), "
        f"so the floor of its work is {same_work:.3f} ms; its own work above it: "
        f"{real_10ms - same_work:.3f} ms"
    )


def busy_core() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every phase's length (default 1)")
    parser.add_argument("--quick", action="store_true", help="same as --scale 0.05 (what the tests run)")
    args = parser.parse_args()
    scale = 0.05 if args.quick else args.scale
    if not scale > 0:
        parser.error("--scale must be > 0")
    load = os.getloadavg()
    print(f"{os.cpu_count()} CPUs, load average at start: {load[0]:.2f}, {load[1]:.2f} (other work competes)")
    with tempfile.TemporaryDirectory(prefix="sampler-bench-") as tmp:
        workdir = Path(tmp)
        real_10ms = collector_cpu_per_tick(0.01, max(1.5, round(20 * scale)), workdir, TREE_COMMAND)
        real_1s = collector_cpu_per_tick(1.0, max(6.0, round(30 * scale)), workdir, TREE_COMMAND)
        print(
            f"python -m collect run, its own CPU per tick: {real_10ms:.3f} ms at 10 ms "
            f"({real_10ms / 10 * 100:.1f} % of a core), {real_1s:.3f} ms at 1 s"
        )
        print_floor(*floor_beside_a_tree(max(1.5, round(10 * scale)), workdir), real_10ms)
        print_breakdown(*tick_breakdown(0.01, max(1.5, round(10 * scale)), workdir))

        samples = max(200, int(3000 * scale))
        per_sample_ms, per_source, rescan_ms, followed = tight_loop_ms(samples, workdir)
        psutil_ms = psutil_sample_ms(max(100, samples // 3), workdir)
        print(
            f"full sample in a tight loop ({samples} in a row, caches warm, unlike a real tick): "
            f"{per_sample_ms:.3f} ms CPU ({followed} processes in the tree)"
        )
        print("  per source (µs): " + ", ".join(f"{name} {us:.0f}" for name, us in per_source.items()))
        processes = sum(len(children) for children in parent_map(Path("/proc")).values())
        print(f"  the same columns with psutil: {psutil_ms:.3f} ms CPU")
        print(f"  one full process-tree rescan: {rescan_ms:.2f} ms ({processes} processes in /proc)")
        prometheus_tick_ms, scrape_ms, scrape_bytes = prometheus_costs(samples, workdir)
        print(
            f"--prometheus: {prometheus_tick_ms * 1000:.2f} µs added per tick; one /metrics answer "
            f"{scrape_ms:.3f} ms CPU ({scrape_bytes} bytes), built once per scrape in the server's thread"
        )

        at_1s = session_run(1.0, max(2.0, round(10 * scale)), workdir)
        hog = busy_core()
        try:
            at_100ms = session_run(0.1, max(1.0, round(20 * scale)), workdir)
        finally:
            hog.kill()
            hog.wait()
        at_10ms = session_run(0.01, max(1.0, round(20 * scale)), workdir)
        for label, result in (("1 s", at_1s), ("0.1 s, one other core busy", at_100ms), ("0.01 s", at_10ms)):
            print(
                f"session at {label}: {result['rows']} rows for {result['expected']} deadlines (+1 row after "
                f"the command ended), "
                f"{result['skipped']} skipped; late p50 {result['late_p50_ms']:.3f} ms, "
                f"p99 {result['late_p99_ms']:.3f} ms, max {result['late_max_ms']:.3f} ms; "
                f"CPU {result['cpu_per_tick_ms']:.3f} ms per tick = {result['core_pct']:.2f} % of a core"
            )
        priority = _priority_used(workdir)
        load = os.getloadavg()
        print(f"sampling thread priority: {priority}; load average afterwards: {load[0]:.2f}, {load[1]:.2f}")

        shell_ms, tools = shell_ms_per_second(max(2, round(8 * scale)))
        print(
            f"shell tools ({', '.join(tools) or 'none installed'}): {shell_ms:.2f} ms CPU per sampled second"
        )
        ratio = shell_ms / real_1s if tools else math.nan
        print(
            f"cpu_ms_per_tick_10ms={real_10ms:.3f} cpu_ms_per_tick_1s={real_1s:.3f} "
            f"late_p99_ms_at_100ms={at_100ms['late_p99_ms']:.3f} ratio_vs_shell={ratio:.1f}"
        )
    return 0


def _priority_used(workdir: Path) -> str:
    records = sorted((workdir / "runs").glob("*/run.json"))
    return json.loads(records[-1].read_text())["sampler"]["priority"] if records else "unknown"


if __name__ == "__main__":
    sys.exit(main())
