"""One colour per run, the same in every tab and on the Sizing page, whatever order the runs were picked in.

CPU runs take blues and greens, GPU runs oranges and reds, anything else purples and greys. Within a
family a run's slot comes from a hash of its run id; when two selected runs of one family hash to the
same slot, the one with the smaller run id keeps it and the other takes the next free one, so the result
depends on which runs are shown, never on the order they were picked in.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

FAMILIES: dict[str, tuple[str, ...]] = {
    "cpu": ("#1f77b4", "#17becf", "#2ca02c", "#3b5bdb", "#0b7285", "#74c0fc", "#5c940d", "#4263eb"),
    "gpu": ("#ff7f0e", "#d62728", "#e8590c", "#c2255c", "#f59f00", "#a61e4d", "#ff8787", "#b35900"),
    "other": ("#9467bd", "#7f7f7f", "#e377c2", "#8c564b", "#6741d9", "#495057", "#ae3ec9", "#5f3dc4"),
}


def family_of(device: str) -> str:
    device = device.lower()
    return device if device in ("cpu", "gpu") else "other"


def _slot(run_id: str, size: int) -> int:
    return int.from_bytes(hashlib.sha1(run_id.encode()).digest()[:4], "big") % size


def colors_for(runs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """{run_id: colour} for (run_id, device) pairs."""
    colors: dict[str, str] = {}
    taken: dict[str, set[int]] = {}
    for run_id, device in sorted(set(runs)):
        family = family_of(device)
        palette = FAMILIES[family]
        used = taken.setdefault(family, set())
        slot = _slot(run_id, len(palette))
        for step in range(len(palette)):
            candidate = (slot + step) % len(palette)
            if candidate not in used:
                slot = candidate
                break
        used.add(slot)
        colors.setdefault(run_id, palette[slot])
    return colors
