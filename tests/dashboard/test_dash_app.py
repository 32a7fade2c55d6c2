"""dashboard.app and dashboard.views: the callbacks called as functions, the file route and the CLI."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from contextvars import copy_context
from pathlib import Path
from typing import Any

import dash
import pytest
from dash._callback_context import context_value
from dash._utils import AttributeDict
from dash.exceptions import PreventUpdate
from dashfixtures import make_run

from dashboard import __main__ as cli
from dashboard import timebase, views
from dashboard.app import create_app
from dashboard.details import phase_durations


def _callback(app, output: str):
    """The undecorated function of the callback whose outputs include `output` (e.g. 'tab-gpu.children')."""
    matches = [
        spec["callback"]
        for key, spec in app.callback_map.items()
        if output in key.split("...") or key.strip(".") == output or f"..{output}.." in key
    ]
    assert len(matches) == 1, f"{output}: {len(matches)} callbacks"
    return matches[0].__wrapped__


def _triggered(prop_id: str, function, *args) -> Any:
    def call() -> Any:
        context_value.set(AttributeDict(triggered_inputs=[{"prop_id": prop_id, "value": None}]))
        return function(*args)

    return copy_context().run(call)


def _graphs(children: list) -> list:
    found = []
    for child in children:
        if type(child).__name__ == "Graph":
            found.append(child.figure)
    return found


@pytest.fixture
def app(data_dir: Path):
    return create_app(data_dir)


def test_layout_lists_runs_and_picks_a_cpu_and_a_gpu_run(
    app, data_dir: Path, run_ids: dict[str, str]
) -> None:
    page = app.layout()
    picker = page["run-picker"]
    assert [option["value"] for option in picker.options] == [
        run_ids["gpu"],
        run_ids["cpu"],
        run_ids["broken"],
    ]
    assert picker.multi is True
    assert sorted(picker.value) == sorted([run_ids["gpu"], run_ids["cpu"]])
    label = picker.options[1]["label"]
    assert label == "cpu baseline · cpu · tensorflow · buildbox · 2026-11-19 13:02 UTC · 2m · completed"
    assert picker.options[2]["label"].endswith("⚠")


def test_refresh_bumps_version_only_when_files_change(app, data_dir: Path, run_ids: dict[str, str]) -> None:
    refresh = _callback(app, "data-version.data")
    selection = [run_ids["cpu"]]
    options, version = refresh(1, selection, None)
    assert len(options) == 3 and isinstance(version, str)
    _, again = refresh(2, selection, version)
    assert again is dash.no_update
    with open(data_dir / "examples" / run_ids["cpu"] / "telemetry.csv", "a") as handle:
        handle.write("1795093500.5" + ",1" * 24 + "\n")
    _, changed = refresh(3, selection, version)
    assert isinstance(changed, str) and changed != version
    make_run(data_dir, device="cpu", host="newbox", start_unix=1795200000.0, duration_s=10)
    options, _ = refresh(4, selection, changed)
    assert len(options) == 4 and "newbox" in options[0]["label"]  # a new run appears without a restart


def test_hidden_tabs_do_no_work(app, run_ids: dict[str, str]) -> None:
    component = _callback(app, "tab-gpu.children")
    with pytest.raises(PreventUpdate):
        component("memory", "seconds", [0, 100], "v1", [run_ids["gpu"]])


@pytest.mark.parametrize("tab", list(views.COMPONENT_TABS))
def test_component_tabs_render_graphs_with_data(app, run_ids: dict[str, str], tab: str) -> None:
    children = _callback(app, f"tab-{tab}.children")(
        tab, "seconds", [0, 100], "v1", [run_ids["cpu"], run_ids["gpu"]]
    )
    graphs = _graphs(children)
    assert graphs, tab
    with_data = [figure for figure in graphs if figure.data]
    assert with_data, f"{tab}: no graph holds data"
    if tab == "processor":
        assert [f.data[0].type for f in graphs[-2:]] == ["heatmap", "heatmap"]
    if tab == "cpu-temp":  # neither run has a sensor: the reason is shown instead
        assert any(
            "no thermal readings" in str(child.children) for child in children if not hasattr(child, "figure")
        )


def test_timeseries_callback_zoom_and_reset(app, run_ids: dict[str, str]) -> None:
    timeseries = _callback(app, "timeseries-graph.figure")
    selection = [run_ids["cpu"], run_ids["gpu"]]
    full = _triggered(
        "metric.value",
        timeseries,
        "timeseries",
        "cpu_util_pct",
        "seconds",
        [0, 100],
        {"xaxis.range[0]": 10, "xaxis.range[1]": 20},
        selection,
    )
    assert len(full.data) == 2 and full.layout.xaxis.range is None  # a stale zoom is ignored
    zoomed = _triggered(
        "timeseries-graph.relayoutData",
        timeseries,
        "timeseries",
        "cpu_util_pct",
        "seconds",
        [0, 100],
        {"xaxis.range[0]": 10, "xaxis.range[1]": 20},
        selection,
    )
    assert list(zoomed.layout.xaxis.range) == [10, 20]
    assert max(zoomed.data[0].x) <= 21.1
    with pytest.raises(PreventUpdate):
        _triggered(
            "timeseries-graph.relayoutData",
            timeseries,
            "timeseries",
            "cpu_util_pct",
            "seconds",
            [0, 100],
            {"dragmode": "pan"},
            selection,
        )
    reset = _triggered(
        "timeseries-graph.relayoutData",
        timeseries,
        "timeseries",
        "cpu_util_pct",
        "seconds",
        [0, 100],
        {"xaxis.autorange": True},
        selection,
    )
    assert reset.layout.xaxis.range is None and len(reset.data[0].x) == 120


def test_metric_choices_keep_current_or_fall_back(app, run_ids: dict[str, str]) -> None:
    choices = _callback(app, "metric.options")
    options, value = choices("v1", [run_ids["gpu"]], "gpu0_power_w")
    assert value == "gpu0_power_w" and "training.loss_total" in [o["value"] for o in options]
    _, value = choices("v2", [run_ids["cpu"]], "gpu0_power_w")
    assert value == "cpu_util_pct"
    assert choices("v3", [], None) == ([], None)


def test_summary_training_details_and_warnings(app, run_ids: dict[str, str]) -> None:
    selection = [run_ids["cpu"], run_ids["gpu"], run_ids["broken"]]
    summary = _graphs(_callback(app, "tab-summary.children")("summary", [0, 100], "v", selection))
    assert len(summary[0].data) == 3 * 2 * 3
    training = _callback(app, "tab-training.children")("training", "percent", [0, 100], "v", selection)
    assert _graphs(training)[0].data
    details = json.dumps(
        _callback(app, "tab-details.children")("details", "v", selection)[0].to_plotly_json(), default=str
    )
    for expected in (
        "Intel(R) Xeon(R) Platinum",
        "python -m training train --device cpu",
        "resnet18",
        "run.json is unreadable",
        "telemetry.csv: truncated last line ignored",
        "NVIDIA H100",
    ):
        assert expected in details
    banner = json.dumps(
        [c.to_plotly_json() for c in _callback(app, "run-warnings.children")("v", selection)], default=str
    )
    assert "truncated last line" in banner and "run.json is unreadable" in banner
    assert _callback(app, "run-warnings.children")("v", [run_ids["cpu"]]) == []


def test_detections_side_by_side_with_map(app, run_ids: dict[str, str]) -> None:
    selection = [run_ids["cpu"], run_ids["gpu"]]
    options, value = _callback(app, "image-picker.options")("v", selection, None)
    assert [o["value"] for o in options] == ["val_0000", "val_0001", "val_0002"] and value == "val_0000"
    cards = _callback(app, "tab-detections.children")("detections", "val_0001", "v", selection)
    text = json.dumps(cards[0].to_plotly_json(), default=str)
    assert "mAP@0.5 0.380" in text and "mAP@0.5 0.440" in text
    assert f"/run-files/{run_ids['cpu']}/detections/val_0001.png" in text
    assert f"/run-files/{run_ids['gpu']}/detections/val_0001.png" in text


def test_detection_images_route_serves_only_safe_files(app, run_ids: dict[str, str]) -> None:
    client = app.server.test_client()
    good = client.get(f"/run-files/{run_ids['cpu']}/detections/val_0000.png")
    assert good.status_code == 200 and good.data[:8] == b"\x89PNG\r\n\x1a\n"
    for bad in (
        f"/run-files/{run_ids['cpu']}/detections/detections.json",
        f"/run-files/{run_ids['cpu']}/detections/..%2Frun.json",
        "/run-files/..%2F..%2Fetc/detections/val_0000.png",
        f"/run-files/{run_ids['cpu']}/detections/missing.png",
    ):
        response = client.get(bad)
        # 404 from the route, or Dash's page for unknown paths: never the file itself
        assert response.status_code == 404 or response.mimetype == "text/html", bad
        assert b"format_version" not in response.data and not response.data.startswith(b"\x89PNG"), bad


def test_unsafe_ids_in_the_selection_are_ignored(app, data_dir: Path, run_ids: dict[str, str]) -> None:
    selection = ["../examples", "/etc", run_ids["cpu"], 42, "nope"]
    assert [run.run_id for run in views.selected_runs(data_dir, selection)] == [run_ids["cpu"]]
    children = _callback(app, "tab-details.children")("details", "v", selection)
    assert len(children[0].children) == 1


def test_zoom_and_window_parsing() -> None:
    assert timebase.zoom_range({"xaxis.range": [1, "2.5"]}) == (1.0, 2.5)
    assert timebase.zoom_range({"xaxis.range[0]": "a", "xaxis.range[1]": 3}) is None
    assert timebase.zoom_range({"xaxis.range[0]": 5, "xaxis.range[1]": 3}) is None
    assert views.window_of([120, -5]) == (0.0, 100.0)
    assert views.window_of([40, 40]) == (0.0, 100.0)
    assert views.window_of([30, 10]) == (10.0, 30.0)


def test_cli_rejects_bad_arguments_with_one_line(tmp_path: Path, capsys) -> None:
    for argv in (
        ["--port", "70000", "--data-dir", str(tmp_path)],
        ["--data-dir", str(tmp_path / "nope")],
        ["--bogus"],
    ):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(argv)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("python -m dashboard: error:"), err


def test_cli_that_cannot_listen_says_why_in_one_line_before_serving(tmp_path: Path, capsys) -> None:
    """A port in use, a host name that does not resolve, an address not this machine's: Flask's server
    would print its own lines and exit 1 after the banner."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert cli.main(["--data-dir", str(tmp_path), "--port", str(port)]) == 2
        err = capsys.readouterr().err
        said = f"cannot serve on 127.0.0.1:{port}: Address already in use\n"
        assert err == f"python -m dashboard: error: {said}"
    assert cli.main(["--data-dir", str(tmp_path), "--host", "no-such-host.invalid"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m dashboard: error: cannot serve on no-such-host.invalid:8050: ")
    assert err.count("\n") == 1


def test_cli_defaults_bind_localhost(tmp_path: Path) -> None:
    args = cli.parse_args(["--data-dir", str(tmp_path)])
    assert (args.host, args.port) == ("127.0.0.1", 8050)


def test_cli_serves_with_debug_off(tmp_path: Path, monkeypatch) -> None:
    served: dict[str, Any] = {}
    monkeypatch.setattr("dash.Dash.run", lambda self, **kwargs: served.update(kwargs))
    monkeypatch.setattr(cli, "_cannot_listen", lambda host, port: None)  # whatever else holds 8123 here
    assert cli.main(["--data-dir", str(tmp_path), "--port", "8123"]) == 0
    assert served == {"host": "127.0.0.1", "port": 8123, "debug": False}


def test_every_view_survives_broken_empty_and_odd_runs(app, data_dir: Path, run_ids: dict[str, str]) -> None:
    (data_dir / "runs" / "empty-run").mkdir()
    odd = data_dir / "runs" / "odd-run"
    (odd / "detections").mkdir(parents=True)
    (odd / "telemetry.csv").write_bytes(b"\x00\xff\xfe not a csv")
    (odd / "training.csv").write_text("time_unix,step\nabc,def\n1795093400,\n")
    (odd / "run.json").write_text(
        json.dumps(
            {
                "label": 5,
                "start_unix": "soon",
                "system": "?",
                "sources": [1],
                "command": "train",
                "actual_duration_s": "long",
            }
        )
    )
    (odd / "training.json").write_text(json.dumps({"config": "x", "global_step": "many"}))
    (odd / "eval.json").write_text('{"map_50": "high"}')
    (odd / "detections" / "detections.json").write_text(
        '{"images": [{"image_id": "val_0000", "file": "../x"}]}'
    )
    selection = [run_ids["broken"], "empty-run", "odd-run"]
    for tab in views.COMPONENT_TABS:
        _callback(app, f"tab-{tab}.children")(tab, "percent", [10, 90], "v", selection)
    _callback(app, "tab-summary.children")("summary", [0, 100], "v", selection)
    _callback(app, "tab-training.children")("training", "seconds", [0, 100], "v", selection)
    _callback(app, "tab-details.children")("details", "v", selection)
    _, image = _callback(app, "image-picker.options")("v", selection, None)
    cards = json.dumps(
        [
            c.to_plotly_json()
            for c in _callback(app, "tab-detections.children")("detections", image, "v", selection)
        ],
        default=str,
    )
    assert "../x" not in cards and "no eval.json" in cards
    _, metric = _callback(app, "metric.options")("v", selection, None)
    _triggered(
        "metric.value",
        _callback(app, "timeseries-graph.figure"),
        "timeseries",
        metric,
        "percent",
        [0, 100],
        None,
        selection,
    )
    banner = json.dumps(
        [c.to_plotly_json() for c in _callback(app, "run-warnings.children")("v", selection)], default=str
    )
    for expected in (
        "telemetry.csv has no valid header line",
        "run.json is missing",
        "training.csv: 2 cell(s) that hold no number",
    ):
        assert expected in banner


def test_report_subcommand_is_dispatched_lazily(monkeypatch) -> None:
    seen: list[list[str]] = []
    monkeypatch.setattr("sizing.cli.main", lambda argv, prog: seen.append(argv) or 7)
    assert cli.main(["report", "--tariff", "0.2"]) == 7
    assert seen == [["--tariff", "0.2"]]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_python_m_dashboard_serves_the_runs(data_dir: Path, run_ids: dict[str, str]) -> None:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "dashboard", "--data-dir", str(data_dir), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        layout = None
        for _ in range(100):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_dash-layout", timeout=2) as response:
                    layout = response.read().decode()
                break
            except OSError:
                time.sleep(0.1)
        assert layout is not None, server.stderr.read() if server.poll() is not None else "no answer"
        assert run_ids["cpu"] in layout and run_ids["gpu"] in layout
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_python_m_dashboard_usage_error_is_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dashboard", "--port", "eighty"], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "invalid int value" in done.stderr


def test_phase_durations_from_phases_csv(data_dir: Path, run_ids: dict[str, str]) -> None:
    cpu = views.get_run(data_dir, run_ids["cpu"])
    assert phase_durations(cpu) == ["109", "3", "3", "1", "n/a"]  # this run has no infer phase
    with open(cpu.path / "phases.csv", "a") as handle:
        handle.write("evaluate,1795093500.0,1795093502.0,failed\n")
    assert phase_durations(cpu)[2] == "5 (failed)"
    (cpu.path / "phases.csv").unlink()
    assert phase_durations(cpu) == ["n/a"] * 5


def test_an_empty_data_dir_shows_hints_not_errors(tmp_path: Path) -> None:
    app = create_app(tmp_path)
    page = app.layout()
    assert page["run-picker"].options == [] and page["run-picker"].value == []
    options, version = _callback(app, "data-version.data")(1, [], None)
    assert options == [] and isinstance(version, str)
    figure = _triggered(
        "tabs.value",
        _callback(app, "timeseries-graph.figure"),
        "timeseries",
        None,
        "seconds",
        [0, 100],
        None,
        [],
    )
    assert "select runs" in figure.layout.annotations[0].text
    hint = _callback(app, "tab-gpu.children")("gpu", "seconds", [0, 100], version, [])
    assert "Select runs" in hint[0].children


def test_images_are_served_with_a_relative_data_dir(
    data_dir: Path, run_ids: dict[str, str], monkeypatch
) -> None:
    monkeypatch.chdir(data_dir.parent)
    client = create_app(Path(data_dir.name)).server.test_client()  # as `python -m dashboard --data-dir data`
    response = client.get(f"/run-files/{run_ids['gpu']}/detections/val_0002.png")
    assert response.status_code == 200 and response.data[:4] == b"\x89PNG"


def test_cpu_only_selection_shows_why_there_is_no_gpu_data(app, run_ids: dict[str, str]) -> None:
    children = _callback(app, "tab-gpu.children")("gpu", "seconds", [0, 100], "v", [run_ids["cpu"]])
    assert not _graphs(children)
    texts = [str(child.children) for child in children]
    assert any("no nvml readings (NVML Shared Library Not Found)" in text for text in texts)
    assert any(text.startswith("Not recorded in the selected runs: GPU utilization") for text in texts)
    summary = _graphs(_callback(app, "tab-summary.children")("summary", [0, 100], "v", [run_ids["cpu"]]))[0]
    assert [a.text for a in summary.layout.annotations] == ["%"]  # no empty °C and W panels
