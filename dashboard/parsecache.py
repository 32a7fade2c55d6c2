"""Parsed big CSVs kept as Parquet outside the run directories, so a restarted dashboard skips the parse.

A 24 h × 10 Hz telemetry.csv takes seconds to parse and a fraction of that to load back from Parquet.
The sidecar lives in a cache directory (never in data/), is named after the CSV's absolute path, and is
used only while the CSV's device, inode, mtime and size are the ones it was made from. Writing happens in
a background thread after the first parse; any failure just means no sidecar.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

CACHE_ENV = "WORKBENCH_DASHBOARD_CACHE"  # a directory, or "off"
MIN_BYTES = 16 * 2**20
_META_KEY = b"gpu-workbench"
_PENDING: list[threading.Thread] = []


def cache_dir() -> Path | None:
    configured = os.environ.get(CACHE_ENV, "")
    if configured.lower() == "off":
        return None
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpu-workbench" / "dashboard"


def sidecar_of(csv_path: Path) -> Path | None:
    directory = cache_dir()
    if directory is None:
        return None
    digest = hashlib.sha1(str(Path(csv_path).resolve()).encode()).hexdigest()[:24]
    return directory / f"{digest}.parquet"


def load(csv_path: Path, identity: tuple[int, int], stamp: tuple[int, int]) -> dict[str, Any] | None:
    """{'frame', 'consumed', 'header', 'warnings'} from a sidecar made from exactly this file version."""
    sidecar = sidecar_of(csv_path)
    if sidecar is None or not sidecar.is_file():
        return None
    try:
        meta = json.loads((pq.read_schema(sidecar).metadata or {})[_META_KEY])
        if meta["source"] != str(Path(csv_path).resolve()) or meta["version"] != [*identity, *stamp]:
            return None
        frame = pq.read_table(sidecar).to_pandas()
    except (OSError, KeyError, ValueError, pa.ArrowException):
        return None
    return {
        "frame": frame,
        "consumed": meta["consumed"],
        "header": meta["header"],
        "warnings": meta["warnings"],
    }


def store_later(
    csv_path: Path,
    identity: tuple[int, int],
    stamp: tuple[int, int],
    frame: pd.DataFrame,
    consumed: int,
    header: list[str],
    warnings: list[str],
) -> None:
    """Write the sidecar in the background if the file is big enough to be worth it."""
    sidecar = sidecar_of(csv_path)
    if sidecar is None or stamp[1] < MIN_BYTES:
        return
    meta = {
        "source": str(Path(csv_path).resolve()),
        "version": [*identity, *stamp],
        "consumed": consumed,
        "header": header,
        "warnings": warnings,
    }
    thread = threading.Thread(target=_store, args=(sidecar, frame, meta), daemon=True)
    _PENDING.append(thread)
    thread.start()


def wait_for_writes(timeout_s: float = 60.0) -> None:
    """Block until background writes are done (tests and the benchmark)."""
    while _PENDING:
        _PENDING.pop().join(timeout_s)


def _store(sidecar: Path, frame: pd.DataFrame, meta: dict[str, Any]) -> None:
    tmp_name = None
    try:
        sidecar.parent.mkdir(parents=True, exist_ok=True)
        table = pa.Table.from_pandas(frame, preserve_index=False)
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), _META_KEY: json.dumps(meta)})
        fd, tmp_name = tempfile.mkstemp(prefix=".", suffix=".parquet.tmp", dir=sidecar.parent)
        os.close(fd)
        pq.write_table(table, tmp_name, compression="lz4")
        os.replace(tmp_name, sidecar)
    except (OSError, ValueError, pa.ArrowException):
        if tmp_name:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
