"""Names and identifiers of the run directory (docs/run-format.md is the prose version)."""

from __future__ import annotations

import os
import re
import socket
from datetime import datetime, timezone
from pathlib import Path

FORMAT_VERSION = 1

RUNS_SUBDIR = "runs"
EXAMPLES_SUBDIR = "examples"

RUN_JSON = "run.json"
TELEMETRY_CSV = "telemetry.csv"
COMMAND_LOG = "command.log"
TRAINING_CSV = "training.csv"
TRAINING_JSON = "training.json"
PHASES_CSV = "phases.csv"
PHASES_COLUMNS = ("phase", "start_unix", "end_unix", "status")  # its header, in order
EVAL_JSON = "eval.json"
CHECKPOINTS_DIR = "checkpoints"
MODEL_DIR = "model"
DETECTIONS_DIR = "detections"
DETECTIONS_JSON = "detections.json"
INFERENCE_CSV = "inference.csv"
INFERENCE_JSON = "inference.json"

# The collector exports these to the command it launches.
RUN_DIR_ENV = "WORKBENCH_RUN_DIR"
RUN_ID_ENV = "WORKBENCH_RUN_ID"

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9-]+")


def is_valid_run_id(run_id: str) -> bool:
    """True for a single, safe path component: no separators, no '..', no leading dot."""
    return bool(_RUN_ID.match(run_id)) and ".." not in run_id


def new_run_id(device: str, now: datetime | None = None, host: str | None = None) -> str:
    """`20261121T130255Z-cpu-myhost`: sortable by start time, readable, a valid run id."""
    stamp = (now or datetime.now(timezone.utc)).astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    host_part = _UNSAFE.sub("-", host or socket.gethostname()).strip("-")[:40] or "host"
    device_part = _UNSAFE.sub("-", device).strip("-")[:16] or "run"
    return f"{stamp}-{device_part}-{host_part}"


def resolve_run_dir(data_dir: Path, run_id: str) -> Path | None:
    """The directory of `run_id` under data_dir/runs or data_dir/examples, or None.

    Rejects ids that are not a single safe path component, so user input can never escape data_dir.
    """
    if not is_valid_run_id(run_id):
        return None
    for sub in (RUNS_SUBDIR, EXAMPLES_SUBDIR):
        candidate = data_dir / sub / run_id
        if candidate.is_dir():
            return candidate
    return None


def child_dirs(parent: Path) -> list[Path]:
    """The directories in `parent`, by name; [] where it cannot be listed. scandir's entry types spare a
    stat per entry (the dashboard lists its data directory every few seconds)."""
    try:
        with os.scandir(parent) as entries:
            names = sorted(entry.name for entry in entries if _is_dir(entry))
    except OSError:
        return []
    base = Path(parent)
    return [base / name for name in names]


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def run_dirs(data_dir: Path) -> list[Path]:
    """The directories with a valid run id under data_dir/runs and data_dir/examples; an id in both once,
    from runs/ (as resolve_run_dir resolves it)."""
    found: dict[str, Path] = {}
    for sub in (RUNS_SUBDIR, EXAMPLES_SUBDIR):
        for entry in child_dirs(Path(data_dir) / sub):
            if is_valid_run_id(entry.name):
                found.setdefault(entry.name, entry)
    return list(found.values())


def unlisted_dirs(data_dir: Path) -> list[Path]:
    """The run directories under data_dir/runs and data_dir/examples that run_dirs leaves out: their names
    are not run ids (a space, an accent: renamed by hand). Hidden directories, and ones without a run's
    files (lost+found), are not runs."""
    return [
        entry
        for sub in (RUNS_SUBDIR, EXAMPLES_SUBDIR)
        for entry in child_dirs(Path(data_dir) / sub)
        if not entry.name.startswith(".")
        and not is_valid_run_id(entry.name)
        and any((entry / name).is_file() for name in (RUN_JSON, TELEMETRY_CSV, TRAINING_CSV))
    ]


RUN_FILES = (RUN_JSON, TELEMETRY_CSV, TRAINING_JSON, TRAINING_CSV)  # any one makes a run directory
SEARCH_DEPTH = 6  # runs copied into a tree: data/<machine>/runs/<id>, an unpacked archive's data/runs/<id>
NOT_RUN_TREES = frozenset({"datasets", "node_modules", "__pycache__"})


def is_run_dir(path: Path) -> bool:
    return any((Path(path) / name).is_file() for name in RUN_FILES)


def run_dirs_below(path: Path, depth: int = SEARCH_DEPTH, skip: frozenset[Path] = frozenset()) -> list[Path]:
    """The run directories under `path`, at most `depth` levels down, by path; a run directory's own
    folders, hidden ones, NOT_RUN_TREES and the folders in `skip` are not searched."""
    found = []
    for child in child_dirs(path):
        if child.name.startswith(".") or child.name in NOT_RUN_TREES or child in skip:
            continue
        if is_run_dir(child):
            found.append(child)
        elif depth > 1:
            found += run_dirs_below(child, depth - 1)
    return found


def runs_elsewhere(data_dir: Path) -> list[Path]:
    """The run directories under data_dir that run_dirs does not list, nor lists under their name: copied
    from another machine into data/gpu-box/runs/, say, or into a folder of runs inside runs/ (the sizing
    report finds them). The runs in runs/ and examples/ are not looked into."""
    data_dir = Path(data_dir)
    listed = {run.name for run in run_dirs(data_dir)}
    places = frozenset(data_dir / sub for sub in (RUNS_SUBDIR, EXAMPLES_SUBDIR))
    found = run_dirs_below(data_dir, skip=places)
    for place in sorted(places):
        for entry in child_dirs(place):  # a folder of runs inside runs/ is not a run, whatever its name
            if not entry.name.startswith(".") and not is_run_dir(entry):
                found += run_dirs_below(entry, SEARCH_DEPTH - 2)
    return [run for run in found if run.name not in listed]


def run_id_like(name: str) -> str:
    """A run id close to `name` (`H100 run (final)` → `H100-run-final`), to suggest a rename."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).replace("..", ".").strip("-.")[:128] or "run"
