"""Dashboard at scale: a 24 h × 10 Hz run (864k rows × 41 columns) through the real callback endpoint.

Builds the run in a temp dir with the test fixture factory (tests/dashboard/dashfixtures.py), starts the
app's Flask server in-process and POSTs to /_dash-update-component exactly as the browser does, for every
view. Reports the one-time CSV parse, then each view's median latency and response size with the cache
warm. The baseline, measured in the same run, is the time-series callback without downsampling.

    .venv/bin/python bench/dashboard_scale.py [--hours 24] [--hz 10] [--repeats 5]
    .venv/bin/python bench/dashboard_scale.py --quick     # 3 minutes of samples, once each: seconds

Last line: `callback_ms=<slowest view's median> payload_bytes=<largest view's response>`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "dashboard"))
sys.path.insert(0, str(REPO))

from dashfixtures import make_run  # noqa: E402

from dashboard import parsecache, runs, sizing_view  # noqa: E402
from dashboard.app import create_app  # noqa: E402
from dashboard.tabs import sizing as sizing_tab  # noqa: E402

TABS = ["processor", "memory", "disk", "cpu-temp", "gpu", "summary", "training", "details"]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--hz", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a 3-minute run, one repeat (the tests run it)")
    args = parser.parse_args()
    if args.quick:
        args.hours, args.repeats = 0.05, 1
    return args


def post_callback(client: Any, app: Any, output: str, values: dict[str, Any], changed: list[str]) -> tuple:
    """POST one callback as the Dash renderer does; (milliseconds, response bytes)."""
    spec = app.callback_map[output]
    outputs = [_prop(part) for part in output.strip(".").split("...")]
    body = {
        "output": output,
        "outputs": outputs if output.startswith("..") else outputs[0],
        "inputs": [dict(i, value=values.get(f"{i['id']}.{i['property']}")) for i in spec["inputs"]],
        "state": [dict(s, value=values.get(f"{s['id']}.{s['property']}")) for s in spec["state"]],
        "changedPropIds": changed,
    }
    started = time.perf_counter()
    response = client.post("/_dash-update-component", json=body)
    elapsed_ms = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise RuntimeError(f"{output}: HTTP {response.status_code}: {response.data[:300]!r}")
    return elapsed_ms, len(response.data)


def _prop(text: str) -> dict[str, str]:
    component, prop = text.rsplit(".", 1)
    return {"id": component, "property": prop}


def post_zoom(client: Any, app: Any, panel: dict[str, str], relayout: dict, values: dict[str, Any]) -> tuple:
    """POST the zoom callback of one time-series panel (a pattern-matching id), as the renderer does."""
    output = next(key for key in app.callback_map if '"zoomable"' in key)
    state = [
        {"id": panel, "property": "id", "value": panel},
        *[
            {"id": name, "property": "value", "value": values[f"{name}.value"]}
            for name in ("x-mode", "window", "run-picker")
        ],
    ]
    body = {
        "output": output,
        "outputs": {"id": panel, "property": "figure"},
        "inputs": [{"id": panel, "property": "relayoutData", "value": relayout}],
        "state": state,
        "changedPropIds": [json.dumps(panel, sort_keys=True, separators=(",", ":")) + ".relayoutData"],
    }
    started = time.perf_counter()
    response = client.post("/_dash-update-component", json=body)
    elapsed_ms = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise RuntimeError(f"zoom {panel}: HTTP {response.status_code}: {response.data[:300]!r}")
    return elapsed_ms, len(response.data)


def measure_zoom(
    client: Any, app: Any, panel: dict[str, str], relayout: dict, values: dict, repeats: int
) -> tuple:
    samples = [post_zoom(client, app, panel, relayout, values) for _ in range(repeats)]
    return statistics.median(ms for ms, _ in samples), max(size for _, size in samples)


def measure(client: Any, app: Any, output: str, values: dict, changed: list[str], repeats: int) -> tuple:
    samples = [post_callback(client, app, output, values, changed) for _ in range(repeats)]
    return statistics.median(ms for ms, _ in samples), max(size for _, size in samples)


def main() -> int:
    args = parse_args()
    with tempfile.TemporaryDirectory(prefix="dashboard-scale-") as tmp:
        data_dir = Path(tmp) / "data"
        os.environ[parsecache.CACHE_ENV] = str(Path(tmp) / "parse-cache")
        started = time.perf_counter()
        run_dir = make_run(
            data_dir,
            device="gpu",
            host="bigbox",
            duration_s=args.hours * 3600,
            interval_s=1.0 / args.hz,
            cores=12,
            gpus=1,
            cpu_temp_sensor=True,
            steps_per_s=5.0,
        )
        csv_mb = (run_dir / "telemetry.csv").stat().st_size / 1e6
        print(
            f"built run: {csv_mb:.0f} MB telemetry.csv in {time.perf_counter() - started:.1f} s", flush=True
        )
        run = runs.get_run(data_dir, run_dir.name)
        started = time.perf_counter()
        frame = runs.read_telemetry(run)
        training = runs.read_training(run)
        parse_ms = (time.perf_counter() - started) * 1000
        print(
            f"first parse (once per file change): {parse_ms:.0f} ms, telemetry {frame.shape[0]} rows × "
            f"{frame.shape[1]} columns, training {len(training)} rows",
            flush=True,
        )
        parsecache.wait_for_writes()
        runs.clear_caches()  # as after a restart of the dashboard
        started = time.perf_counter()
        runs.read_telemetry(run)
        runs.read_training(run)
        sidecar_ms = (time.perf_counter() - started) * 1000
        print(f"after a restart, from the Parquet sidecars: {sidecar_ms:.0f} ms", flush=True)

        app = create_app(data_dir)
        client = app.server.test_client()
        selection = [run.run_id]
        _, version = json.loads(
            client.post(
                "/_dash-update-component",
                json={
                    "output": "..run-picker.options...data-version.data..",
                    "outputs": [
                        {"id": "run-picker", "property": "options"},
                        {"id": "data-version", "property": "data"},
                    ],
                    "inputs": [
                        {"id": "refresh", "property": "n_intervals", "value": 1},
                        {"id": "run-picker", "property": "value", "value": selection},
                    ],
                    "state": [{"id": "data-version", "property": "data", "value": None}],
                    "changedPropIds": ["refresh.n_intervals"],
                },
            ).data
        )["response"].values()
        base = {
            "run-picker.value": selection,
            "x-mode.value": "seconds",
            "window.value": [0, 100],
            "data-version.data": version["data"],
            "metric.value": "gpu0_power_w",
        }
        results: dict[str, tuple[float, int]] = {}
        for tab in TABS:
            results[tab] = measure(
                client, app, f"tab-{tab}.children", base | {"tabs.value": tab}, ["tabs.value"], args.repeats
            )
        results["timeseries"] = measure(
            client,
            app,
            "timeseries-graph.figure",
            base | {"tabs.value": "timeseries"},
            ["metric.value"],
            args.repeats,
        )
        zoom = {"timeseries-graph.relayoutData": {"xaxis.range[0]": 40000.0, "xaxis.range[1]": 40600.0}}
        results["timeseries zoom"] = measure(
            client,
            app,
            "timeseries-graph.figure",
            base | {"tabs.value": "timeseries"} | zoom,
            ["timeseries-graph.relayoutData"],
            args.repeats,
        )
        ten_minutes = {"xaxis.range[0]": 40000.0, "xaxis.range[1]": 40600.0}
        for view, panel in (
            ("gpu", "metric-3"),
            ("processor", f"heatmap-{run.run_id}"),
            ("training", "training"),
        ):
            panel_id = {"type": "zoomable", "view": view, "panel": panel}
            results[f"{view} zoom"] = measure_zoom(client, app, panel_id, ten_minutes, base, args.repeats)
        results["window 40-60 %"] = measure(
            client,
            app,
            "tab-gpu.children",
            base | {"tabs.value": "gpu", "window.value": [40, 60]},
            ["window.value"],
            args.repeats,
        )
        sizing_form = {
            f"{sizing_tab.field_id(name)}.value": default for name, _, default, *_ in sizing_view.FIELDS
        }
        sizing_ms, sizing_size = measure(
            client,
            app,
            "sizing-result.children",
            base | sizing_form | {"tabs.value": sizing_tab.TAB_VALUE},  # built only while visible
            ["tabs.value"],
            args.repeats,
        )
        print(f"  (Sizing page, dashboard/tabs/sizing.py: {sizing_ms:.1f} ms {sizing_size / 1e6:.3f} MB)")
        for name, (ms, size) in results.items():
            print(f"  {name:16s} {ms:7.1f} ms {size / 1e6:7.3f} MB", flush=True)

        baseline_app = create_app(data_dir, max_points=10**9)  # every sample sent to the browser
        raw_ms, raw_size = post_callback(
            baseline_app.server.test_client(),
            baseline_app,
            "timeseries-graph.figure",
            base | {"tabs.value": "timeseries"},
            ["metric.value"],
        )
        print(
            f"baseline without downsampling: timeseries {raw_ms:.0f} ms {raw_size / 1e6:.1f} MB", flush=True
        )

    slowest = max(ms for ms, _ in results.values())
    largest = max(size for _, size in results.values())
    print(
        f"parse_ms={parse_ms:.0f} sidecar_ms={sidecar_ms:.0f} baseline_callback_ms={raw_ms:.0f} "
        f"baseline_payload_bytes={raw_size}"
    )
    print(f"callback_ms={slowest:.1f} payload_bytes={largest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
