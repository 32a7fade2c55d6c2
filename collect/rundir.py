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
    for attempt in range(1, 1000):
        candidate = runs / (base if attempt == 1 else f"{base}-{attempt}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            raise SessionError(f"cannot create {candidate}: {exc.strerror or exc}") from exc
        return candidate.resolve()
    raise SessionError(f"too many runs named {base} in {runs}")
