"""Data the workbench did not write: no empty axes, None or zero bars for unknowns; stable colours; zoom."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from dash.exceptions import PreventUpdate
from dashfixtures import make_run
from sparsefixtures import SPARSE_NOTE, SPARSE_SOURCE_NOTE, make_sparse_run

from dashboard import colors, detections_view, figures, views
from dashboard.app import create_app
from dashboard.runs import discover_runs

SPARSE_START = 1795300000.0


@pytest.fixture
def sparse_id(data_dir: Path) -> str:
    return make_sparse_run(data_dir, start_unix=SPARSE_START).name


def walk(component: Any) -> list[Any]:
    """The component and everything under it."""
    found = [component]
    children = getattr(component, "children", None)
    for child in children if isinstance(children, list) else [children]:
        if child is not None and not isinstance(child, str | int | float):
            found += walk(child)
    return found


def texts(children: list[Any]) -> list[str]:
    out = []
    for component in [c for child in children for c in walk(child)]:
        value = getattr(component, "children", None)
        out += [v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str)]
    return out


def graphs(children: list[Any]) -> list[Any]:
    return [c.figure for child in children for c in walk(child) if type(c).__name__ == "Graph"]


def assert_every_panel_has_data(children: list[Any]) -> None:
    for figure in graphs(children):
        assert figure.data, f"empty panel: {figure.layout.title.text}"
        assert all(len(t.x if t.x is not None else []) or t.z is not None for t in figure.data)
        assert not [a.text for a in figure.layout.annotations if "no " in (a.text or "")]
    assert not [t for t in texts(children) if "None" in t], texts(children)


def test_every_view_of_a_sparse_run_says_what_is_missing(data_dir: Path, sparse_id: str) -> None:
    selection = [sparse_id]
    for tab in views.COMPONENT_TABS:
        children = views.component_view(data_dir, selection, tab, "seconds", [0, 100])
        assert_every_panel_has_data(children)
        assert graphs(children) or any("not recorded" in t or "No " in t for t in texts(children)), tab
    processor = views.component_view(data_dir, selection, "processor", "seconds", [0, 100])
    assert [f.layout.title.text for f in graphs(processor)] == ["CPU utilization, all cores"]
    assert any(
        t.startswith("Per-core utilization: not recorded in converted recording") for t in texts(processor)
    )
    disk = texts(views.component_view(data_dir, selection, "disk", "seconds", [0, 100]))
    assert "Not recorded in the selected runs: Network throughput." in disk
    gpu = views.component_view(data_dir, selection, "gpu", "seconds", [0, 100])
    assert [f.layout.title.text for f in graphs(gpu)] == ["GPU temperature"]
    assert any("GPU utilization, GPU power: average, instant and limit, GPU clocks" in t for t in texts(gpu))

    summary = views.summary_view(data_dir, selection, [0, 100])
    assert_every_panel_has_data(summary)
    (bars,) = graphs(summary)
    categories = {(t.xaxis, x) for t in bars.data for x in t.x}
    assert ("x", "GPU") not in categories and ("x", "GPU memory") not in categories
    assert ("x2", "GPU") in categories  # GPU temperature was recorded
    assert any("GPU (%), GPU memory (%), GPU (W)" in t for t in texts(summary))

    training = views.training_view(data_dir, selection, "seconds", [0, 100])
    assert graphs(training) == [] and "No training in the selected runs" in texts(training)[0]
    assert "No held-out images" in texts(detections_view.detections_view(data_dir, selection, None))[0]


def test_unknown_components_are_na_not_zero_beside_a_full_run(
    data_dir: Path, sparse_id: str, run_ids: dict[str, str]
) -> None:
    selection = [run_ids["gpu"], sparse_id]
    summary = views.summary_view(data_dir, selection, [0, 100])
    (bars,) = graphs(summary)
    sparse_bars = [t for t in bars.data if t.legendgroup == sparse_id]
    missing = [
        (t.xaxis, x) for t in sparse_bars for x, text in zip(t.x, t.text, strict=True) if text == "n/a"
    ]
    assert ("x", "GPU") in missing and ("x3", "GPU") in missing  # utilization and power: not recorded
    for trace in sparse_bars:
        for text, color in zip(trace.text, trace.marker.color, strict=True):
            assert (text == "n/a") == (color == "rgba(0,0,0,0)")  # an unknown has a label, never a bar
    assert any("n/a (not recorded)" in t for t in texts(summary))
    training = views.training_view(data_dir, selection, "seconds", [0, 100])
    assert any(t.startswith("Not training runs") and "converted recording" in t for t in texts(training))
    (figure,) = graphs(training)
    utilization = [t for t in figure.data if "utilization" in t.name]
    assert utilization and all(t.showlegend for t in utilization)
    assert "—" not in json.dumps(training[0].to_plotly_json(), default=str)


def test_run_details_show_notes_the_real_directory_and_recorded_columns(
    tmp_path: Path, data_dir: Path, sparse_id: str
) -> None:
    (card,) = views.details_view(data_dir, [sparse_id])[0].children
    shown = texts([card])
    assert str((data_dir / "runs" / sparse_id).absolute()) in shown
    assert SPARSE_NOTE in shown and any(SPARSE_SOURCE_NOTE in t for t in shown)
    assert not [t for t in shown if "None" in t]
    assert "n/a / n/a" in shown  # driver / CUDA unknown
    assert "gpu0_temp_c" in shown and "cpu_util_pct" in shown
    assert any("sensor: k10temp Tctl" in t for t in shown)
    assert "disk_util_pct, disk_read_bps, disk_write_bps" in shown  # what the disk source really filled


def test_colours_follow_the_run_not_the_selection_order(data_dir: Path, run_ids: dict[str, str]) -> None:
    first = views.selected_runs(data_dir, [run_ids["cpu"], run_ids["gpu"]])
    second = views.selected_runs(data_dir, [run_ids["gpu"], run_ids["cpu"]])
    assert figures.run_colors(first) == figures.run_colors(second)
    by_run = figures.run_colors(first)
    assert (
        by_run[run_ids["cpu"]] in colors.FAMILIES["cpu"] and by_run[run_ids["gpu"]] in colors.FAMILIES["gpu"]
    )
    for order in ([run_ids["cpu"], run_ids["gpu"]], [run_ids["gpu"], run_ids["cpu"]]):
        for tab in ("processor", "memory"):
            for figure in graphs(views.component_view(data_dir, order, tab, "seconds", [0, 100])):
                for trace in figure.data:
                    if trace.legendgroup:
                        assert trace.line.color == by_run[trace.legendgroup]


def test_same_family_runs_get_distinct_colours(tmp_path: Path) -> None:
    for n in range(6):
        make_run(tmp_path, host=f"box{n}", start_unix=1795000000.0 + 3600 * n, seed=n)
    runs = discover_runs(tmp_path)
    assigned = figures.run_colors(runs)
    assert len(set(assigned.values())) == 6
    assert figures.run_colors(list(reversed(runs))) == assigned


def test_zoom_refines_component_heatmap_and_training_panels(data_dir: Path, run_ids: dict[str, str]) -> None:
    app = create_app(data_dir, max_points=50)
    (zoom,) = [spec["callback"].__wrapped__ for key, spec in app.callback_map.items() if "zoomable" in key]
    selection = [run_ids["cpu"], run_ids["gpu"]]
    relayout = {"xaxis.range[0]": 20.0, "xaxis.range[1]": 40.0}
    full = views.zoomed_panel(data_dir, selection, "memory", "metric-0", "seconds", [0, 100], None, 50)
    assert all(len(trace.x) == 50 for trace in full.data)  # 120 and 90 samples, downsampled
    panel = {"type": views.ZOOMABLE, "view": "memory", "panel": "metric-0"}
    zoomed = zoom(relayout, panel, "seconds", [0, 100], selection)
    assert all(trace.x[0] >= 19 and trace.x[-1] <= 41 and len(trace.x) >= 20 for trace in zoomed.data)
    assert list(zoomed.layout.xaxis.range) == [20.0, 40.0]
    heat = zoom(
        relayout,
        panel | {"view": "processor", "panel": f"heatmap-{run_ids['gpu']}"},
        "seconds",
        [0, 100],
        selection,
    )
    assert min(heat.data[0].x) >= 20 and max(heat.data[0].x) <= 40
    training = zoom(
        {"xaxis3.range[0]": 20.0, "xaxis3.range[1]": 40.0},
        panel | {"view": "training", "panel": "training"},
        "seconds",
        [0, 100],
        selection,
    )
    # one neighbour each side of the range is kept so lines reach the edges; steps come every 2 s here
    assert training.data and all(min(t.x) >= 17 and max(t.x) <= 43 for t in training.data)
    with pytest.raises(PreventUpdate):
        zoom({"legend.x": 1}, panel, "seconds", [0, 100], selection)


def test_detections_with_many_runs_selected(tmp_path: Path) -> None:
    for n in range(10):
        make_run(tmp_path, host=f"box{n}", start_unix=1795000000.0 + 3600 * n, with_eval=n == 9, seed=n)
    selection = [run.run_id for run in sorted(discover_runs(tmp_path), key=lambda r: r.host)]
    options, value = detections_view.image_choices(tmp_path, selection, None)
    assert value == "val_0000" and options
    shown = detections_view.detections_view(tmp_path, selection, value)
    assert "box0" in texts(shown)[0] or "cpu run" in texts(shown)[0]  # the runs without detections, named
    images = [c for child in shown for c in walk(child) if type(c).__name__ == "Img"]
    assert len(images) == 1
    banner = texts(views.warnings_banner(tmp_path, selection))
    assert any("10 runs selected" in t for t in banner)


def test_time_series_names_runs_without_the_metric(
    data_dir: Path, sparse_id: str, run_ids: dict[str, str]
) -> None:
    selection = [run_ids["gpu"], sparse_id]
    power = views.timeseries_figure(data_dir, selection, "gpu0_power_w", "seconds", [0, 100], None)
    assert [t.legendgroup for t in power.data] == [run_ids["gpu"]]
    assert power.layout.title.text.endswith("· not recorded in converted recording")
    empty = views.timeseries_figure(data_dir, [run_ids["cpu"]], "cpu_temp_c", "seconds", [0, 100], None)
    assert not empty.data and empty.layout.xaxis.visible is False
    assert "cpu_temp_c: not recorded in the selected runs" in empty.layout.annotations[0].text


def test_a_zoom_past_the_readings_keeps_its_axes(data_dir: Path, run_ids: dict[str, str]) -> None:
    far = {"xaxis.range[0]": 5000.0, "xaxis.range[1]": 6000.0}
    selection = [run_ids["cpu"]]
    for view, panel in (("memory", "metric-0"), ("processor", f"heatmap-{run_ids['cpu']}")):
        figure = views.zoomed_panel(data_dir, selection, view, panel, "seconds", [0, 100], far)
        assert "zoomed range" in figure.layout.annotations[0].text
        assert figure.layout.xaxis.visible is not False and list(figure.layout.xaxis.range) == [
            5000.0,
            6000.0,
        ]


def test_a_run_directory_renamed_by_hand_is_named_not_silently_left_out(tmp_path: Path) -> None:
    """`mv <run_id> "H100 run (final)"`: a name with spaces is not a run id, so the picker cannot list it;
    it vanished without a word. The banner names it and a name that would be listed; hidden ones stay
    quiet."""
    run_dir = make_run(tmp_path, duration_s=10, with_training=False, with_eval=False)
    before = views.selection_signature(tmp_path, [])
    renamed = run_dir.rename(run_dir.parent / "H100 run é (final)")
    assert views.selection_signature(tmp_path, []) != before  # the banner says so as it happens
    (run_dir.parent / ".staging").mkdir()
    (run_dir.parent / "lost+found").mkdir()  # a file system's own, no run's files in it
    assert discover_runs(tmp_path) == []
    banner = texts(views.warnings_banner(tmp_path, []))
    assert any(
        f"runs/{renamed.name} is not listed" in t and "rename it, e.g. to H100-run-final" in t for t in banner
    ), banner
    assert not any(".staging" in t or "lost+found" in t for t in banner)
    renamed.rename(run_dir.parent / "H100-run-final")
    assert [run.run_id for run in discover_runs(tmp_path)] == ["H100-run-final"]
    assert views.warnings_banner(tmp_path, []) == []


def test_runs_copied_below_the_data_directory_are_named_not_silently_left_out(tmp_path: Path) -> None:
    """Runs copied from the GPU machine into data/gpu-box/runs/: the sizing report finds them, the picker
    lists data/runs and data/examples only, and they vanished without a word. The banner names them (three,
    then how many more) until a copy is in data/runs, as they come, not when the selection changes."""
    run_dir = make_run(tmp_path, duration_s=10, with_training=False, with_eval=False)
    before = views.selection_signature(tmp_path, [])
    for where in ("gpu-box/runs/a", "gpu-box/runs/b", "lab/2026/c", "lab/2026/d"):
        shutil.copytree(run_dir, tmp_path / where)
    assert views.selection_signature(tmp_path, []) != before  # the banner is drawn again, not at a reselect
    (tmp_path / "datasets" / "e").mkdir(parents=True)
    (tmp_path / "datasets" / "e" / "run.json").write_text("{}")  # a dataset's own file: not searched
    banner = texts(views.warnings_banner(tmp_path, []))
    assert any(
        t.startswith(
            "gpu-box/runs/a, gpu-box/runs/b, lab/2026/c and 1 more are not listed (the picker lists "
        )
        and t.endswith(f"here; python -m sizing {tmp_path} sizes them where they are")
        for t in banner
    ), banner
    for name in ("a", "b", "c", "d"):
        shutil.copytree(tmp_path / "lab" / "2026" / "c", tmp_path / "runs" / name)
    assert views.warnings_banner(tmp_path, []) == []
    shutil.copytree(run_dir, tmp_path / "runs" / "from-gpu-box" / "e")  # a folder of runs in runs/
    banner = texts(views.warnings_banner(tmp_path, []))
    assert any(t.startswith("runs/from-gpu-box/e is not listed") for t in banner), banner
