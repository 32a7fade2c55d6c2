"""`import-nvidia-smi --into RUN_DIR`: an nvidia-smi log's GPU columns added to an existing run.

Rows are aligned by time: the run's rows keep every cell, the log's samples become rows of their own
between them (or share a row whose time is the same), so neither side is resampled. telemetry.csv is
rewritten beside itself and renamed over the old one, then run.json; a refused merge changes nothing.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from collect.importers.nvsmi_fields import NvsmiImportError, Value
from collect.importers.rundir import read_csv, utc, write_csv
from runformat import RUN_JSON, TELEMETRY_CSV, TRAINING_CSV, read_json, write_json_atomic
from runformat.columns import GPU_COLUMN


def _float(text: object) -> float | None:
    try:
        return float(str(text))
    except ValueError:
        return None


def _clock(unix: float) -> str:
    return datetime.fromtimestamp(unix, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def merge_into(
    run_dir: Path,
    columns: list[str],
    rows: list[dict[str, Value]],
    gpus: list[dict[str, Any]],
    driver: str | None,
    imported: dict[str, Any],
    notes: list[str],
    not_recorded: dict[str, str],
    gpm: dict[str, Any],
    label: str = "",
) -> Path:
    meta_path, telemetry_path = run_dir / RUN_JSON, run_dir / TELEMETRY_CSV
    if not meta_path.is_file() or not telemetry_path.is_file():
        raise NvsmiImportError(f"--into {run_dir}: not a run directory (no run.json and telemetry.csv)")
    try:
        meta = read_json(meta_path)
    except ValueError as exc:
        raise NvsmiImportError(f"--into {run_dir}: run.json is unreadable ({exc})") from exc
    if any(not isinstance(meta.get(key, {}), dict) for key in ("sources", "system")):
        raise NvsmiImportError(f"--into {run_dir}: run.json's sources or system is not an object")
    header, existing = read_csv(telemetry_path)
    taken = [name for name in header if GPU_COLUMN.match(name)]
    if taken:
        raise NvsmiImportError(
            f"--into {run_dir}: the run already has GPU columns ({taken[0]}, ...): nothing changed"
        )
    times = [t for row in existing if (t := _float(row.get("time_unix"))) is not None]
    if "time_unix" not in header or not times:
        raise NvsmiImportError(f"--into {run_dir}: telemetry.csv has no time_unix rows to align with")
    run_start = _float(meta.get("start_unix")) or min(times)
    run_end = max(_float(meta.get("end_unix")) or max(times), max(times))
    log_start, log_end = float(rows[0]["time_unix"] or 0.0), float(rows[-1]["time_unix"] or 0.0)
    if log_end < run_start or log_start > run_end:
        raise NvsmiImportError(
            f"the log covers {_clock(log_start)} to {_clock(log_end)} (read as UTC{imported['utc_offset']}), "
            f"the run {_clock(run_start)} to {_clock(run_end)}: no overlap; is --utc-offset right?"
        )
    merged: dict[float, dict[str, Value]] = {}
    for row in existing:
        key = _float(row.get("time_unix"))
        merged.setdefault(key if key is not None else float("nan"), {}).update(row)
    for row in rows:
        merged.setdefault(float(row["time_unix"] or 0.0), {}).update(row)
    start, end = min(run_start, log_start), max(run_end, log_end)
    ordered = [merged[key] for key in sorted(merged, key=lambda k: (k != k, k))]
    for row in ordered:
        moment = _float(row.get("time_unix"))
        if moment is not None and (start != run_start or row.get("elapsed_s") in (None, "")):
            row["elapsed_s"] = round(moment - start, 3)
    write_csv(telemetry_path, header + columns, ordered)
    before = sum(1 for row in rows if float(row["time_unix"] or 0.0) < run_start)
    after = sum(1 for row in rows if float(row["time_unix"] or 0.0) > run_end)
    _update_meta(meta, gpus, driver, imported, notes, not_recorded, run_dir)
    meta["sources"]["gpm"] = gpm  # the GPU columns, GPM's included, are now the log's
    outside = [f"{n} {where}" for n, where in ((before, "before its start"), (after, "after its end")) if n]
    if outside:
        meta["notes"].append(
            f"{' and '.join(outside)} of the log's samples lie outside the run: its span grew"
        )
    if label:
        meta["label"] = label
    meta.update(
        start_unix=start, start_utc=utc(start), end_unix=end, end_utc=utc(end),
        actual_duration_s=round(end - start, 3), samples=len(ordered),
    )  # fmt: skip
    write_json_atomic(meta_path, meta)
    return run_dir


def _update_meta(
    meta: dict[str, Any],
    gpus: list[dict[str, Any]],
    driver: str | None,
    imported: dict[str, Any],
    notes: list[str],
    not_recorded: dict[str, str],
    run_dir: Path,
) -> None:
    old_notes = meta.get("notes")
    meta["notes"] = [old_notes] if isinstance(old_notes, str) else list(old_notes or [])
    meta["notes"] += notes
    if meta.get("device") != "gpu":
        meta["notes"].append(
            f"device was {meta.get('device')!r}; now 'gpu': nvidia-smi recorded the host's GPUs "
            "at the same time"
        )
        meta["device"] = "gpu"
    system = meta.setdefault("system", {})
    system.update(
        gpu_count=len(gpus), gpus=gpus, gpu_driver_version=driver or system.get("gpu_driver_version")
    )
    sources = meta.setdefault("sources", {})
    sources["nvml"] = {
        "available": True,
        "notes": [f"from nvidia-smi ({imported['format']}), not NVML directly"],
    }
    missing = {k: v for k, v in not_recorded.items() if k == "training GPUs" and len(gpus) > 1}
    if not (run_dir / TRAINING_CSV).is_file() and "training steps" in not_recorded:
        missing["training steps"] = "no training.csv: neither recording has training steps"
    if missing:
        meta["not_recorded"] = {**(meta.get("not_recorded") or {}), **missing}
        meta["notes"] += [f"not recorded: {why}" for why in missing.values()]
    meta["merged_from"] = [*(meta.get("merged_from") or []), imported]
