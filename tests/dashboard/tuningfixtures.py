"""Runs of a `--tune` sweep for the dashboard tests: run directories with run.json's `tuning` tag."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dashfixtures import make_run

from runformat.tuning import FINAL, OK, TRIAL, Setting, TrialOutcome, TuningTag


def make_tagged_run(
    data_dir: Path, run_id: str, start: float, tag: TuningTag | None, rate: float, **training: Any
) -> Path:
    """A short run directory whose training.json says `rate` steady examples/s, tagged in run.json."""
    path = make_run(
        data_dir, run_id=run_id, start_unix=start, duration_s=30, steps_per_s=rate / 2, seed=3, label=run_id
    )
    if tag is not None:
        meta = json.loads((path / "run.json").read_text())
        (path / "run.json").write_text(json.dumps({**meta, "tuning": tag.record()}))
    if training:
        info = json.loads((path / "training.json").read_text())
        (path / "training.json").write_text(json.dumps({**info, **training}))
    return path


def make_sweep(data_dir: Path, sweep_id: str, run_ids: tuple[str, str, str], start: float) -> None:
    """Two ok trials (batch 2, then batch 4 at 1.75x) and the final run at batch 4."""
    yours, bigger = Setting(2), Setting(4)
    outcomes = (
        TrialOutcome(run_ids[0], yours, OK, None, 4.0, 25.0),
        TrialOutcome(run_ids[1], bigger, OK, None, 7.0, 24.0),
    )
    for position, (setting, rate) in enumerate([(yours, 4.0), (bigger, 7.0)]):
        tag = TuningTag(sweep_id, TRIAL, position, setting, yours)
        make_tagged_run(data_dir, run_ids[position], start + 60 * position, tag, rate)
    final = TuningTag(sweep_id, FINAL, 2, bigger, yours, "batch 4 ran 1.75x yours", outcomes)
    make_tagged_run(data_dir, run_ids[2], start + 120, final, 7.2)
