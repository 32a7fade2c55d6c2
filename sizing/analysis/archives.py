"""Runs packed into an archive (`tar czf gpu-runs.tgz data/runs`, a zip a colleague sent), sized as they are:
only the files the report reads are unpacked, into a temporary directory that lives while the runs load."""

from __future__ import annotations

import lzma
import tarfile
import zipfile
import zlib
from pathlib import Path

from runformat import (
    EVAL_JSON,
    INFERENCE_JSON,
    PHASES_CSV,
    RUN_JSON,
    TELEMETRY_CSV,
    TRAINING_CSV,
    TRAINING_JSON,
)
from runformat.textfile import COMPRESSED
from sizing.model import UsageError

ARCHIVES = (".tar", ".tgz", ".tar.gz", ".txz", ".tar.xz", ".tbz", ".tbz2", ".tar.bz2", ".zip")
READ_FILES = (RUN_JSON, TELEMETRY_CSV, TRAINING_CSV, TRAINING_JSON, PHASES_CSV, EVAL_JSON, INFERENCE_JSON)
READ_NAMES = frozenset((*READ_FILES, *(f"{name}{packed}" for name in READ_FILES for packed in COMPRESSED)))
MAX_UNPACKED_BYTES = 8 << 30  # what the files read from one archive may unpack to (a zip bomb is refused)
UNREADABLE = (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, zlib.error, lzma.LZMAError, ValueError)


def is_archive(path: Path) -> bool:
    return path.is_file() and path.name.lower().endswith(ARCHIVES)


def stem_of(archive: Path) -> str:
    """`gpu-runs` of gpu-runs.tar.gz: the name of a run packed from inside its directory."""
    name = archive.name
    for suffix in sorted(ARCHIVES, key=len, reverse=True):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)] or "archive"
    return name


def unpack_runs(archive: Path, into: Path) -> Path:
    """The files sizing reads, unpacked from `archive` to into/<its stem>/ (a run packed from inside its
    directory is then a run of that name); the folder to look for runs in. UsageError (one line) for an
    archive that cannot be read, holds no run's files, or would unpack to more than MAX_UNPACKED_BYTES."""
    base = into / stem_of(archive)
    base.mkdir(parents=True)
    unpack = _unzip if archive.name.lower().endswith(".zip") else _untar
    try:
        count = unpack(archive, base)
    except UNREADABLE as exc:
        why = (str(exc).splitlines() or [""])[0].rstrip(":")
        raise UsageError(f"{str(archive)!r}: cannot read the archive ({type(exc).__name__}: {why})") from None
    if not count:
        raise UsageError(f"{str(archive)!r}: the archive holds no run's files ({', '.join(READ_FILES)})")
    return base


def _wanted(name: str) -> bool:
    return Path(name).name in READ_NAMES


def _refuse_if_too_big(archive: Path, total: int) -> None:
    if total > MAX_UNPACKED_BYTES:
        raise UsageError(
            f"{str(archive)!r}: its run files would unpack to {total / 2**30:,.1f} GiB (more than "
            f"{MAX_UNPACKED_BYTES / 2**30:g}): unpack it yourself and give the run directories"
        )


def _untar(archive: Path, base: Path) -> int:
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and _wanted(m.name)]
        _refuse_if_too_big(archive, sum(m.size for m in members))
        tar.extractall(base, members=members, filter="data")
    return len(members)


def _unzip(archive: Path, base: Path) -> int:
    with zipfile.ZipFile(archive) as packed:
        members = [m for m in packed.infolist() if not m.is_dir() and _wanted(m.filename)]
        _refuse_if_too_big(archive, sum(m.file_size for m in members))
        for member in members:
            packed.extract(member, base)  # zipfile keeps names inside base (no '..', no absolute path)
    return len(members)
