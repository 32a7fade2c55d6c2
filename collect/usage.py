"""Checks of what the user named, before anything starts: each problem is one line for stderr."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

DATASET_JSON = "dataset.json"


def data_dir_problem(data_dir: Path) -> str | None:
    """None if runs can be recorded under data_dir: an existing, writable directory, or a missing one
    whose parent is (the data directory itself is created, never a chain of missing parents)."""
    data_dir = Path(data_dir)
    if data_dir.exists():
        if not data_dir.is_dir():
            return f"--data-dir {data_dir}: not a directory"
        return _unwritable(data_dir, f"--data-dir {data_dir}")
    parent = data_dir.absolute().parent
    if not parent.is_dir():
        return f"--data-dir {data_dir}: no such directory, nor its parent {parent}"
    return _unwritable(parent, f"--data-dir {data_dir}: cannot be created in {parent}")


def _unwritable(directory: Path, what: str) -> str | None:
    """A real probe (a file created and removed), so read-only mounts and root's view count too."""
    try:
        handle, probe = tempfile.mkstemp(prefix=".workbench-probe-", dir=directory)
    except OSError as exc:
        return f"{what}: not writable ({exc.strerror or exc})"
    os.close(handle)
    os.unlink(probe)
    return None


def dataset_problem(dataset: Path) -> str | None:
    """None if dataset looks like a training dataset this user can read (dataset.json or train*.tfrecord)."""
    dataset = Path(dataset)
    if not dataset.is_dir():
        return f"--dataset {dataset}: no such directory"
    try:
        names = os.listdir(dataset)
    except OSError as exc:
        return f"--dataset {dataset}: not readable ({exc.strerror or exc})"
    records = sorted(name for name in names if name.startswith("train") and ".tfrecord" in name)
    if not records and DATASET_JSON not in names:
        return f"--dataset {dataset}: no dataset there (no {DATASET_JSON}, no train*.tfrecord)"
    for name in [*records, *([DATASET_JSON] if DATASET_JSON in names else [])]:
        try:
            with (dataset / name).open("rb") as handle:
                handle.read(1)
        except OSError as exc:
            return f"--dataset {dataset}: cannot read {name} ({exc.strerror or exc})"
    return None
