"""The GPU tab's profiling counters (GPM): SM, tensor and DRAM activity beside utilization for each GPU that
has them; nothing, and no error, for runs without them; the reason run.json gives when a GPU run has none."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from dashfixtures import make_run

from dashboard import gpu_figures, runs, views
from dashboard.timebase import TimeView


def _with_gpm(run_dir: Path, gpm_source: dict[str, Any], read: dict[int, float]) -> Path:
    """The run's telemetry.csv gains every GPU's SM, tensor and DRAM activity columns: GPU i reads
    `read[i]` % SM active (tensor half, DRAM a third of it); a GPU not in `read` has the columns, empty."""
    frame = pd.read_csv(run_dir / "telemetry.csv")
    gpus = sorted(int(m.group(1)) for c in frame.columns if (m := re.fullmatch(r"gpu(\d+)_util_pct", c)))
    for index in gpus:
        sm = np.full(len(frame), read[index]) if index in read else np.full(len(frame), np.nan)
        frame[f"gpu{index}_sm_active_pct"] = sm
        frame[f"gpu{index}_tensor_active_pct"] = sm / 2
        frame[f"gpu{index}_dram_active_pct"] = sm / 3
    frame.to_csv(run_dir / "telemetry.csv", index=False)
    meta = json.loads((run_dir / "run.json").read_text())
    meta["sources"]["gpm"] = gpm_source
    (run_dir / "run.json").write_text(json.dumps(meta))
    return run_dir


def _graphs(children: list) -> list:
    return [child for child in children if type(child).__name__ == "Graph"]


def _texts(children: list) -> list[str]:
    return [str(child.children) for child in children if type(child).__name__ != "Graph"]


HALF_SUPPORTED = {
    "available": True,
    "period_s": 1.0,
    "gpus": [{"index": 0, "supported": True}, {"index": 1, "supported": False, "reason": "MIG mode"}],
}


def test_activity_beside_utilization_for_each_gpu_that_has_it(tmp_path: Path) -> None:
    gpm_dir = make_run(tmp_path, device="gpu", host="hopper", label="h100 gpm", gpus=2, seed=5, duration_s=60)
    _with_gpm(gpm_dir, HALF_SUPPORTED, {0: 62.0})
    plain_dir = make_run(tmp_path, device="gpu", host="ampere", label="a100", gpus=1, seed=6, duration_s=60)
    gpm_run, plain = runs.open_run_dir(gpm_dir), runs.open_run_dir(plain_dir)
    assert gpu_figures.gpm_gpu_indices(gpm_run) == [0]  # gpu1's columns are there but empty
    assert gpu_figures.gpm_gpu_indices(plain) == []
    figure = gpu_figures.gpu_activity_figure([plain, gpm_run], 0)
    assert [trace.name for trace in figure.data] == [
        "h100 gpm · utilization",
        "h100 gpm · SM active",
        "h100 gpm · tensor active",
        "h100 gpm · DRAM active",
    ]  # the run without counters draws nothing here (its utilization has its own graph)
    assert {trace.type for trace in figure.data} == {"scatter"}  # SVG, not WebGL
    assert [trace.line.dash for trace in figure.data] == ["solid", "dot", "dash", "dashdot"]
    assert len({trace.line.color for trace in figure.data}) == 1  # one run, one colour
    assert set(figure.data[1].y) == {62.0} and set(figure.data[2].y) == {31.0}
    assert np.median(figure.data[0].y) > 50  # utilization: the fixture's busy GPU, not the counters
    assert figure.layout.yaxis.range == (0, 105) and "GPU 0" in figure.layout.title.text
    nothing = gpu_figures.gpu_activity_figure([plain], 0)
    assert not nothing.data and "not recorded" in nothing.layout.annotations[0].text


def test_long_runs_are_downsampled(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, device="gpu", gpus=1, duration_s=2000, interval_s=0.1, with_training=False)
    run = runs.open_run_dir(_with_gpm(run_dir, HALF_SUPPORTED, {0: 40.0}))
    figure = gpu_figures.gpu_activity_figure([run], 0, TimeView(max_points=500))
    assert len(figure.data) == 4 and all(len(trace.x) == 500 for trace in figure.data)
    zoomed = gpu_figures.gpu_activity_figure([run], 0, TimeView(x_range=(100.0, 110.0), max_points=500))
    assert all(99.0 <= trace.x[0] <= 100.0 and 110.0 <= trace.x[-1] <= 111.0 for trace in zoomed.data)


def test_gpu_tab_places_them_after_utilization_and_says_why_not(tmp_path: Path) -> None:
    gpm_dir = make_run(tmp_path, device="gpu", host="hopper", label="h100 gpm", gpus=2, seed=5, duration_s=60)
    _with_gpm(gpm_dir, HALF_SUPPORTED, {0: 62.0})
    refused = make_run(tmp_path, device="gpu", host="vm", label="vm gpu", gpus=1, seed=7, duration_s=60)
    refusal = {"available": False, "reason": "profiling refused (driver or VM setting)"}
    meta = json.loads((refused / "run.json").read_text())
    (refused / "run.json").write_text(json.dumps(meta | {"sources": meta["sources"] | {"gpm": refusal}}))
    cpu = make_run(tmp_path, device="cpu", host="cpubox", label="cpu", seed=8, duration_s=60)
    _with_gpm(cpu, {"available": False, "reason": "no NVIDIA GPU"}, {})
    ids = [path.name for path in (gpm_dir, refused, cpu)]
    children = views.component_view(tmp_path, ids, "gpu", "seconds", [0, 100])
    graphs = _graphs(children)
    titles = [graph.figure.layout.title.text for graph in graphs]
    assert titles[0] == "GPU utilization" and titles[1].startswith("GPU 0: utilization beside SM")
    assert not any(title.startswith("GPU 1:") for title in titles)  # gpu1 read none
    assert graphs[1].id == views.panel_id("gpu", "gpm-0")
    texts = _texts(children)
    assert "vm gpu: no profiling counters (profiling refused (driver or VM setting))." in texts
    assert "h100 gpm: no profiling counters on gpu1 (MIG mode)." in texts
    assert not any(text.startswith("cpu: no profiling") for text in texts)  # no GPU: the nvml line says it
    zoomed = views.zoomed_panel(tmp_path, ids, "gpu", "gpm-0", "seconds", [0, 100], {"xaxis.range": [10, 20]})
    assert zoomed.data and all(trace.x[0] <= 10 and trace.x[-1] >= 20 for trace in zoomed.data)
    assert list(zoomed.layout.xaxis.range) == [10, 20]


def test_runs_without_counters_show_no_activity_graph_and_no_error(tmp_path: Path) -> None:
    plain = make_run(tmp_path, device="gpu", host="ampere", label="a100", gpus=2, seed=6, duration_s=60)
    children = views.component_view(tmp_path, [plain.name], "gpu", "seconds", [0, 100])
    titles = [graph.figure.layout.title.text for graph in _graphs(children)]
    assert titles and not any("SM, tensor and DRAM" in title for title in titles)
    assert not any("profiling" in text for text in _texts(children))  # run.json says nothing of GPM
    assert views.zoomed_panel(tmp_path, [plain.name], "gpu", "gpm-0", "seconds", [0, 100], None).data == ()
