"""The dashboard's views of many devices: the scaling section on the Sizing tab, and every GPU of one run
side by side on the GPU tab (a straggler marked)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
from dash import dcc, html
from sizingfixtures import write_run
from test_sizing_scaling import gpu_sweep_run
from test_sizing_view import DEFAULTS, all_text, walk

from dashboard import sizing_view
from dashboard.app import create_app


def _gpu_tab(app):  # type: ignore[no-untyped-def]
    """The GPU tab's callback, undecorated (as tests/dashboard/test_dash_app.py calls it)."""
    (spec,) = [spec for key, spec in app.callback_map.items() if "tab-gpu.children" in key]
    return spec["callback"].__wrapped__


def test_the_sizing_tab_shows_the_scaling_table_and_plot(tmp_path: Path) -> None:
    for n in (1, 2, 4):
        write_run(tmp_path / "runs", gpu_sweep_run(n))
    values = DEFAULTS.copy()
    values[1], values[2], values[4] = 30_000, 10_000, 100  # GPU price, host price, value per hour
    content = sizing_view.sizing_content(tmp_path, [f"sweep-gpu{n}" for n in (1, 2, 4)], values)
    text = all_text(content)
    assert "Scaling: " in text and "80 %" in text and "90 %" in text
    assert "Largest count whose every step pays back within the 3-year life at 100% use: 4 GPUs" in text
    graphs = [c for tree in content for c in walk(tree) if isinstance(c, dcc.Graph)]
    titles = [g.figure.layout.title.text for g in graphs]
    assert "Throughput against device count" in titles


def test_the_sizing_tab_says_the_time_saved_is_not_valued_without_a_value_per_hour(tmp_path: Path) -> None:
    write_run(tmp_path / "runs", gpu_sweep_run(1))
    write_run(tmp_path / "runs", gpu_sweep_run(2, rate=34.0))  # 1.70×, more energy per example
    values = DEFAULTS.copy()
    values[1], values[2] = 30_000, 10_000  # GPU price, host price; no value per hour
    text = all_text(sizing_view.sizing_content(tmp_path, ["sweep-gpu1", "sweep-gpu2"], values))
    assert (
        "Largest count that pays back: time saved not valued: cannot tell at the step from 1 GPU to 2 GPUs"
        in text
    )
    assert "1 GPUs" not in text and "never pays back" not in text


def test_the_gpu_tab_shows_every_gpu_of_a_run_side_by_side_with_the_straggler(tmp_path: Path) -> None:
    run = gpu_sweep_run(4)
    telemetry = run.telemetry.copy()
    telemetry["gpu2_util_pct"] = np.full(len(telemetry), 40.0)  # one GPU waits on the others
    write_run(tmp_path / "runs", replace(run, telemetry=telemetry))
    gpu_tab = _gpu_tab(create_app(tmp_path))
    content = gpu_tab("gpu", "seconds", [0, 100], "v", ["sweep-gpu4"])
    tables = [c for tree in content for c in walk(tree) if isinstance(c, html.Table)]
    (table,) = [t for t in tables if t.className == "gpu-side-by-side"]
    rows = [r for r in walk(table) if isinstance(r, html.Tr)][1:]
    assert [r.children[0].children for r in rows] == ["gpu0", "gpu1", "gpu2", "gpu3"]
    assert rows[2].children[-1].children == "straggler: 55 points below the others"
    assert all(r.children[-1].children == "" for i, r in enumerate(rows) if i != 2)
    heatmaps = [c for tree in content for c in walk(tree) if isinstance(c, dcc.Graph)
                and c.figure.layout.title.text.startswith("Utilization of every GPU")]  # fmt: skip
    assert len(heatmaps) == 1 and list(heatmaps[0].figure.data[0].y) == ["gpu0", "gpu1", "gpu2", "gpu3"]
    one_gpu = gpu_sweep_run(1)
    write_run(tmp_path / "runs", one_gpu)
    single = gpu_tab("gpu", "seconds", [0, 100], "v2", ["sweep-gpu1"])
    assert not [c for tree in single for c in walk(tree) if isinstance(c, html.Table)]
