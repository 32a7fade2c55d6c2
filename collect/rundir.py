"""The run directory a recording writes into: data_dir/runs/<run_id>/, created once, never reused."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from collect import slurm
from runformat import RUNS_SUBDIR, new_run_id


class SessionError(Exception):
    """The collector could not start (e.g. the run directory cannot be created); one line for the user."""


def create_run_dir(data_dir: Path, device: str, start: datetime) -> Path:
    """data_dir/runs/<run_id>, with -2, -3... when that id is taken."""
    runs = Path(data_dir) / RUNS_SUBDIR
    try:
        runs.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SessionError(f"cannot create {runs}: {exc.strerror or exc}") from exc
    base = new_run_id(device, start) + slurm.run_id_suffix(os.environ)
    try:
        return unique_dir(runs, base)
    except OSError as exc:
        raise SessionError(f"cannot create a run directory {base} in {runs}: {exc.strerror or exc}") from exc


def unique_dir(parent: Path, base: str) -> Path:
    """parent/base, else parent/base-2, -3...: the first that did not exist, created (resolved); OSError when
    none can be."""
    for attempt in range(1, 1000):
        candidate = parent / (base if attempt == 1 else f"{base}-{attempt}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate.resolve()
    raise OSError(f"too many runs named {base} in {parent}")
