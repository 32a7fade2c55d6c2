"""What a column of the process source costs the collector: the source's CPU per 10 ms tick in real sessions,
with the column read and with it left out, alternately, on a command of 41 threads (40 sleeping, one busy),
the medians compared. The busiest-thread column (`proc_busiest_thread_pct`) by default; `--column io` the
tree's storage I/O (`proc_read_bps`, `proc_write_bps`, one /proc/<pid>/io read per process).

    python bench/busiest_thread_cost.py                # 3 pairs of 8-s sessions
    python bench/busiest_thread_cost.py --column io    # the same for the I/O columns
    python bench/busiest_thread_cost.py --quick        # 1 pair of 1-s sessions (what the tests run)

Last line: with_us_per_tick=<µs> without_us_per_tick=<µs> added_us_per_tick=<µs>
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sampler import tick_cost

from collect.sources.process import ProcessTreeSource

THREADED_COMMAND = """import os, time, threading
def busy():
    while True: pass
for _ in range(40): threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
threading.Thread(target=busy, daemon=True).start()
"""


def _skipped(self: ProcessTreeSource, *args: object) -> None:
    return None


READS = {"busiest-thread": "_busiest_thread_pct", "io": "_io_total"}  # the method that reads each column


def measure(seconds: float, pairs: int, column: str = "busiest-thread") -> tuple[float, float]:
    """Median µs per 10 ms tick of the process source, with and without the column read."""
    method = READS[column]
    real = getattr(ProcessTreeSource, method)
    original = tick_cost.TRAINING_WRITER
    tick_cost.TRAINING_WRITER = original.replace("import os, time", THREADED_COMMAND, 1)
    found: dict[str, list[float]] = {"with": [], "without": []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for pair in range(pairs):
                for arm in ("with", "without"):
                    setattr(ProcessTreeSource, method, real if arm == "with" else _skipped)
                    per_tick, ticks = tick_cost.tick_breakdown(0.01, seconds, Path(tmp) / f"{arm}{pair}")
                    found[arm].append(per_tick["source process"])
                    cost = per_tick["source process"]
                    print(f"{arm}: process source {cost:.2f} µs per tick, {ticks} ticks")
    finally:
        setattr(ProcessTreeSource, method, real)
        tick_cost.TRAINING_WRITER = original
    return statistics.median(found["with"]), statistics.median(found["without"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one pair of 1-s sessions")
    parser.add_argument("--column", choices=sorted(READS), default="busiest-thread", help="what to cost")
    args = parser.parse_args()
    with_us, without_us = measure(1.0, 1, args.column) if args.quick else measure(8.0, 3, args.column)
    print(
        f"with_us_per_tick={with_us:.2f} without_us_per_tick={without_us:.2f} "
        f"added_us_per_tick={with_us - without_us:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
