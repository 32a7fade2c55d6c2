"""Reading run directories (docs/run-format.md) into RunData: reading only, every problem a warning.

The JSON files come through runformat.read_run (one reader, one warning per problem file); the CSV files are
parsed here with pandas.

Accepts runs written by other tools too: any file may be missing; telemetry without `time_unix` but
with `elapsed_s` is placed at run.json's `start_unix` (or 0).
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pandas as pd

from runformat import (
    EXAMPLES_SUBDIR,
    PHASES_CSV,
    RUN_JSON,
    RUNS_SUBDIR,
    TELEMETRY_CSV,
    TRAINING_CSV,
    is_valid_run_id,
    resolve_run_dir,
    run_dirs,
)
from runformat.layout import child_dirs, is_run_dir, run_dirs_below
from runformat.reader import read_run
from runformat.records import raw_of
from runformat.textfile import COMPRESSED, comma_separated, packed_copy, text_encoding, unpacked
from sizing.analysis.archives import is_archive, unpack_runs
from sizing.analysis.cells import as_numbers
from sizing.analysis.copies import same_measurement
from sizing.analysis.jobs import node_place
from sizing.analysis.validate import validated_run
from sizing.model import RunData, UsageError


def read_csv_file(path: Path, numeric: bool = True) -> tuple[pd.DataFrame, str | None]:
    """The complete rows of a CSV, or of its compressed copy (runformat.textfile.unpacked); a truncated last
    line is dropped (and said)."""
    packing = None
    if not path.is_file():
        packed = packed_copy(path)
        if packed is None:
            return pd.DataFrame(), None
        raw, packing = unpacked(packed)
        if raw is None:
            return pd.DataFrame(), packing
    else:
        try:
            raw = path.read_bytes()
        except OSError as exc:
            return pd.DataFrame(), f"{path.name} unreadable ({exc.strerror or exc})"
    text = raw.decode(text_encoding(raw), errors="replace")
    note = packing
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
        note = "; ".join(n for n in (note, f"{path.name}: truncated last line ignored") if n)
    if not text.strip():
        return pd.DataFrame(), note
    text, locale = comma_separated(text, path.name)
    note = "; ".join(n for n in (note, locale) if n) or None
    try:
        frame = pd.read_csv(io.StringIO(text), on_bad_lines="skip", skipinitialspace=True)
        frame.columns = [str(name).strip() for name in frame.columns]  # "a, b" as another tool writes it
    except (ValueError, pd.errors.ParserError) as exc:
        return pd.DataFrame(), f"{path.name} unparseable ({exc})".splitlines()[0]
    if numeric:
        frame, cells = as_numbers(frame)
        note = "; ".join(n for n in (note, cells and f"{path.name}: {cells}") if n) or None
    return frame, note


def load_run_dir(path: Path) -> RunData:
    run_id = path.resolve().name
    files = read_run(path)
    meta = files.meta
    info, progress_note = files.progress.applied_to(raw_of(files.training)) if files.progress else ({}, "")
    notes = [*files.warnings, progress_note]
    telemetry, note = read_csv_file(path / TELEMETRY_CSV)
    notes.append(note)
    training, note = read_csv_file(path / TRAINING_CSV)
    notes.append(note)
    phases, note = read_csv_file(path / PHASES_CSV, numeric=False)
    notes.append(note)
    warnings = [f"{run_id}: {n}" for n in notes if n]
    if not meta:
        warnings.append(f"{run_id}: no {RUN_JSON}: device and hardware unknown, inferred from telemetry")
    if not telemetry.empty and "time_unix" not in telemetry and "elapsed_s" in telemetry:
        start = (files.run and files.run.start_unix) or 0.0
        telemetry = telemetry.assign(time_unix=telemetry["elapsed_s"] + start)
    if not phases.empty:
        for column in ("start_unix", "end_unix"):
            if column in phases:
                phases[column] = pd.to_numeric(phases[column], errors="coerce")
    evaluation = files.evaluation or {}
    inference = raw_of(files.inference) if files.inference is not None else None
    run = RunData(run_id, meta, info, evaluation, telemetry, training, phases, tuple(warnings), inference)
    return validated_run(run)


def resolve_run(data_dir: Path, spec: str) -> Path:
    """A run id under data_dir/runs or data_dir/examples, else a run directory path."""
    if not spec.strip():
        raise UsageError("an empty run given (an unset shell variable?): name a run id or directory")
    if is_valid_run_id(spec):
        found = resolve_run_dir(data_dir, spec)
        if found is not None:
            return found
    path = Path(spec)
    if path.is_dir():
        return path
    if path.is_file():
        if path.name.lower().endswith(ARCHIVE_SUFFIXES):
            hint = ": give its run directory, or an archive of runs (.tar, .tgz, .zip)"
        else:
            hint = f": give its run directory, {str(path.parent)!r}" if is_run_dir(path.parent) else ""
        raise UsageError(f"{spec!r} is a file, not a run directory{hint}")
    raise UsageError(
        f"unknown run {spec!r}: not a run id under {data_dir}/runs or {data_dir}/examples, "
        "nor a run directory"
    )


ARCHIVE_SUFFIXES = (
    ".7z",
    ".rar",
    *COMPRESSED,
)  # a file compressed, or an archive not read (archives.ARCHIVES are)


def runs_under(path: Path) -> list[Path]:
    """A run directory itself; else every run directory under it, SEARCH_DEPTH levels down (a folder of
    runs, a data directory, runs copied from another machine into a folder of their own), an id in both
    runs/ and examples/ once, from runs/ (runformat.run_dirs). [path] when it holds none, so that its own
    error names it."""
    if is_run_dir(path):
        return [path]
    shadowed = {path / EXAMPLES_SUBDIR / run.name for run in child_dirs(path / RUNS_SUBDIR)}
    found: dict[Path, Path] = {}
    for candidate in (*run_dirs(path), *run_dirs_below(path)):
        if candidate not in shadowed and is_run_dir(candidate):
            found.setdefault(candidate.resolve(), candidate)
    return list(found.values()) or [path]


def load_runs(data_dir: Path, specs: Sequence[str]) -> list[RunData]:
    """The runs the specs name (run ids, run directories, folders of runs, archives of them), each directory
    once, the first spec that reaches it naming it; a run named twice itself is refused. An archive's run
    files are unpacked into a temporary directory while they load; warnings name the archive."""
    if not specs:
        raise UsageError("no runs given")
    with contextlib.ExitStack() as stack:
        scratch: Path | None = None  # made for the first archive given
        found: dict[Path, str] = {}  # each run directory, and the first spec that reached it
        named: list[Path] = []  # runs given themselves, not found in a folder given
        places: dict[str, str] = {}  # an unpacked archive's folder -> the archive, for the warnings
        for number, spec in enumerate(specs):
            if is_archive(Path(spec)):
                scratch = scratch or _scratch_dir(stack)
                given = unpack_runs(Path(spec), scratch / str(number))
                places[str(given.resolve())] = f"{spec}:"
            else:
                given = resolve_run(data_dir, spec)
            runs = [run.resolve() for run in runs_under(given)]
            if runs == [given.resolve()]:
                named.append(given.resolve())
            for run in runs:
                found.setdefault(run, spec)
        given_twice = sorted({path.name for path in named if named.count(path) > 1})
        if given_twice:
            raise UsageError(f"run given twice: {', '.join(given_twice)}")
        loaded = _one_per_id(named_apart([(load_run_dir(path), path, spec) for path, spec in found.items()]))
    return [_placed(run, places) for run in loaded] if places else loaded


def _scratch_dir(stack: contextlib.ExitStack) -> Path:
    try:
        return Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="sizing-archives-")))
    except OSError as exc:
        raise UsageError(
            f"cannot make a temporary directory to read an archive in ({exc.strerror or exc})"
        ) from None


def _placed(run: RunData, places: dict[str, str]) -> RunData:
    """The run with its warnings naming the archive a path inside an unpacked one came from."""
    warnings = []
    for warning in run.warnings:
        for folder, archive in places.items():
            warning = warning.replace(folder + "/", archive).replace(folder, archive.rstrip(":"))
        warnings.append(warning)
    return replace(run, warnings=tuple(warnings))


def named_apart(found: list[tuple[RunData, Path, str]]) -> list[tuple[RunData, Path, str]]:
    """Runs whose directories share a name (`cpu-box/latest`, `gpu-box/latest`) but whose run.json name
    different recordings are named by their paths below the folder they share; the copies of one recording
    share its name (counted once below). Runs without a recorded run_id, or recording the same one, keep
    their directory's name."""
    runs = [run for run, _, _ in found]
    by_name: dict[str, list[tuple[str | None, Path]]] = {}
    for run, path, _ in found:
        recorded = run.meta.get("run_id")
        by_name.setdefault(run.run_id, []).append(
            (recorded if isinstance(recorded, str) and recorded else None, path)
        )
    names: dict[Path, str] = {}
    for dir_name, places in by_name.items():
        first_of: dict[str, Path] = {}
        for recorded, path in places:
            if recorded is not None:
                first_of.setdefault(recorded, path)
        if len(first_of) < 2 or _nodes_of_one_job(runs, dir_name):
            continue
        shared = Path(os.path.commonpath([str(path) for path in first_of.values()]))
        names.update(
            {path: first_of[recorded].relative_to(shared).as_posix() for recorded, path in places if recorded}
        )
    return [(_renamed(run, names[path]) if path in names else run, path, spec) for run, path, spec in found]


def _renamed(run: RunData, name: str) -> RunData:
    prefix = f"{run.run_id}: "
    warnings = tuple(f"{name}: {w.removeprefix(prefix)}" if w.startswith(prefix) else w for w in run.warnings)
    note = f"{name}: named by its path: another run directory given is also called {run.run_id!r}"
    return replace(run, run_id=name, warnings=(*warnings, note))


def _one_per_id(found: list[tuple[RunData, Path, str]]) -> list[RunData]:
    """One run per id, the first found, except for the nodes of one multi-node job. Another under the same
    id is left out with a warning when it is a copy (every file read the same: a backup, a second unpacked
    archive) or was found in the same folder given (a stale copy elsewhere in a data directory); two runs
    named apart under one id are refused."""
    runs = [run for run, _, _ in found]
    kept: list[RunData] = []
    first_of: dict[str, tuple[int, Path, str]] = {}
    for run, path, spec in found:
        if run.run_id not in first_of or _nodes_of_one_job(runs, run.run_id):
            first_of.setdefault(run.run_id, (len(kept), path, spec))
            kept.append(run)
            continue
        index, first_path, first_spec = first_of[run.run_id]
        if kept[index].meta == run.meta and same_measurement(kept[index], run):
            note = f"{run.run_id}: also at {path}, the same measurement: counted once, from {first_path}"
        elif spec == first_spec:
            note = (f"{run.run_id}: another run under this id, at {path}, differs from the one sized (at "
                    f"{first_path}): left out; give its path to size it")  # fmt: skip
        else:
            raise UsageError(
                f"run given twice: {run.run_id} ({first_path} and {path} differ: give one of them)"
            )
        kept[index] = replace(kept[index], warnings=(*kept[index].warnings, note))
    return kept


def _nodes_of_one_job(runs: Sequence[RunData], run_id: str) -> bool:
    """The runs named run_id are different nodes of one multi-node training (two "nodes" on one host
    write the same run id into two data directories); the report shows node 0's id alone."""
    places = [node_place(r) for r in runs if r.run_id == run_id]
    if any(place is None for place in places):
        return False
    keys = {place[0] for place in places if place is not None}
    ranks = [place[1] for place in places if place is not None]
    return len(keys) == 1 and len(set(ranks)) == len(ranks)
