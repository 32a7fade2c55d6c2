"""A scaling sweep: one timed run per device count (`--procs 1,2`, `--gpus 1,2,4,8`), each in its own run
directory, all tagged in run.json as one sweep so sizing/analysis/scaling.py can line them up.

run.json of each gets `"sweep": {"id", "devices", "counts", "count", "position"}`: the sweep's id (shared),
`procs` or `gpus`, every count asked for, this run's count and its 0-based position in `counts`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

INTERRUPTED = 130


@dataclass(frozen=True)
class Sweep:
    id: str
    devices: str  # "procs" or "gpus"
    counts: tuple[int, ...]

    def record(self, count: int) -> dict:
        """What run.json carries for the run of `count` devices."""
        return {
            "sweep": {
                "id": self.id,
                "devices": self.devices,
                "counts": list(self.counts),
                "count": count,
                "position": self.counts.index(count),
            }
        }


def new_sweep(devices: str, counts: list[int], now: datetime | None = None) -> Sweep:
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    return Sweep(f"sweep-{stamp}-{devices}-{'-'.join(map(str, counts))}", devices, tuple(counts))


@dataclass
class SweepStep:
    count: int
    exit_code: int
    run_dir: Path | None


def run_sweep(sweep: Sweep, run_one: Callable[[int, dict], tuple[int, Path | None]]) -> list[SweepStep]:
    """run_one(count, extra run.json fields) per count, in order; an interrupted run ends the sweep."""
    done = []
    for count in sweep.counts:
        exit_code, run_dir = run_one(count, sweep.record(count))
        done.append(SweepStep(count, exit_code, run_dir))
        if exit_code == INTERRUPTED:
            break
    return done


def sweep_exit_code(steps: list[SweepStep]) -> int:
    """130 if interrupted, else the first failure's code, else 0."""
    codes = [step.exit_code for step in steps]
    if INTERRUPTED in codes:
        return INTERRUPTED
    return next((code for code in codes if code != 0), 0)


def sweep_lines(sweep: Sweep, steps: list[SweepStep], data_dir: Path = Path("data")) -> list[str]:
    lines = [f"Sweep {sweep.id}: {len(steps)} of {len(sweep.counts)} counts run"]
    for step in steps:
        where = step.run_dir.name if step.run_dir is not None else "no run directory"
        lines.append(f"  {sweep.devices} {step.count}: exit code {step.exit_code}, {where}")
    skipped = sweep.counts[len(steps) :]
    if skipped:
        lines.append(f"  not run (stopped): {', '.join(map(str, skipped))}")
    ids = " ".join(step.run_dir.name for step in steps if step.run_dir is not None)
    if ids:
        where = "" if Path(data_dir) == Path("data") else f" --data-dir {data_dir}"
        lines.append(f"  scaling verdict: .venv/bin/python -m sizing {ids}{where} --out scaling.html")
    return lines
