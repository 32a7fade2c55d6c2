"""One measurement under two names: a run directory copied (into examples/, to another data dir) and given
a new id. Its telemetry, step log and training record are the original's, so counting both would make a
"repeat" whose spread is zero and a "concurrent" run that never ran: the report counts it once."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from runformat import TELEMETRY_CSV, TRAINING_CSV, TRAINING_JSON
from sizing.model import RunData


def same_measurement(a: RunData, b: RunData) -> bool:
    """telemetry.csv, training.csv and training.json identical, and not all empty."""
    if a.telemetry.empty and a.training.empty:
        return False
    return (
        a.training_info == b.training_info
        and _same_frame(a.telemetry, b.telemetry)
        and _same_frame(a.training, b.training)
    )


def _same_frame(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    if a.shape != b.shape or list(a.columns) != list(b.columns):
        return False
    return a.empty or a.equals(b)


def fold_copies(
    runs: Sequence[RunData], keep: str | None = None
) -> tuple[tuple[RunData, ...], tuple[str, ...]]:
    """The runs with each copy of another left out (the first given stands for both, or the one named
    `keep`, the baseline), and a note per copy."""
    kept: list[RunData] = []
    copies: list[tuple[str, str]] = []
    for run in runs:
        original = next((i for i, k in enumerate(kept) if same_measurement(k, run)), None)
        if original is None:
            kept.append(run)
            continue
        if run.run_id == keep:
            kept[original], run = run, kept[original]
        copies.append((run.run_id, kept[original].run_id))
    notes = tuple(
        f"{copy} holds the same measurement as {original} ({TELEMETRY_CSV}, {TRAINING_CSV} and "
        f"{TRAINING_JSON} identical: a copied run directory): counted once, as {original}"
        for copy, original in copies
    )
    return tuple(kept), notes
