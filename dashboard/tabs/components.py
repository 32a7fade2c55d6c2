"""The five component tabs (processor, memory, disk & network, CPU temperature, GPU): one graph per metric
some selected run recorded; the GPU tab adds every GPU of a many-GPU run side by side."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dashboard import gpu_side_by_side, timebase, views
from dashboard.tabs.base import WINDOW_ID, X_MODE_ID, Tab, View, content_tab


def _view(component: str) -> View:
    def view(
        data_dir: Path, run_ids: Sequence[str] | None, x_mode: str, window: Sequence[float] | None
    ) -> list[Any]:
        parts = views.component_view(data_dir, run_ids, component, x_mode, window)
        if component == "gpu":  # every GPU of a many-GPU run side by side
            runs = views.selected_runs(data_dir, run_ids)
            parts += gpu_side_by_side.gpu_tab_parts(runs, x_mode, timebase.window_of(window))
        return parts

    return view


TABS: tuple[Tab, ...] = tuple(
    content_tab(name, label, _view(name), (X_MODE_ID, WINDOW_ID))
    for name, label in views.COMPONENT_TABS.items()
)
