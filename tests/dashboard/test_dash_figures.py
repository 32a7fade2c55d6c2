"""dashboard.figures: downsampling, alignment, windows and the figures built from fixture runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from dashfixtures import make_run

from dashboard import figures, overview, runs, timebase
from dashboard.timebase import TimeView


def _runs(data_dir: Path, run_ids: dict[str, str], *names: str) -> list[runs.RunInfo]:
    return [runs.get_run(data_dir, run_ids[name]) for name in names]


def test_downsample_keeps_extremes_and_bounds_points() -> None:
    x = np.arange(100_000, dtype=np.float64)
    y = np.sin(x / 1000.0)
    y[54_321] = 50.0  # a single spike must survive
    dx, dy = timebase.downsample(x, y, 500)
    assert len(dx) == 500
    assert dy.max() == 50.0 and dy.min() == pytest.approx(-1.0, abs=1e-3)
    assert np.all(np.diff(dx) > 0)


def test_downsample_drops_missing_and_sorts() -> None:
    x = np.array([3.0, 1.0, 2.0, np.nan, 4.0])
    y = np.array([30.0, 10.0, np.nan, 5.0, 40.0])
    dx, dy = timebase.downsample(x, y, 100)
    assert dx.tolist() == [1.0, 3.0, 4.0] and dy.tolist() == [10.0, 30.0, 40.0]


def test_visible_slice_includes_one_neighbour_each_side() -> None:
    x = np.arange(10, dtype=np.float64)
    rows = timebase.visible_slice(x, 3.5, 6.5)
    assert x[rows].tolist() == [3.0, 4.0, 5.0, 6.0, 7.0]


def test_series_xy_seconds_percent_window_and_zoom(data_dir: Path, run_ids: dict[str, str]) -> None:
    (cpu,) = _runs(data_dir, run_ids, "cpu")
    frame = runs.read_telemetry(cpu)
    x, _ = timebase.series_xy(cpu, frame, "cpu_util_pct", TimeView(timebase.X_SECONDS))
    assert len(x) == 120 and x[0] == pytest.approx(0.0, abs=0.01) and x[-1] == pytest.approx(119.0, abs=0.01)
    px, _ = timebase.series_xy(cpu, frame, "cpu_util_pct", TimeView(timebase.X_PERCENT))
    assert px[-1] == pytest.approx(119.0 / 120.0 * 100.0, abs=0.01)
    wx, _ = timebase.series_xy(cpu, frame, "cpu_util_pct", TimeView(timebase.X_SECONDS, window=(50.0, 75.0)))
    assert wx[0] == pytest.approx(59.0, abs=0.01) and wx[-1] == pytest.approx(90.0, abs=0.01)
    zx, _ = timebase.series_xy(cpu, frame, "cpu_util_pct", TimeView(timebase.X_PERCENT, x_range=(10.0, 20.0)))
    assert zx[0] <= 10.0 < zx[1] and zx[-2] < 20.0 <= zx[-1]
    nx, _ = timebase.series_xy(cpu, frame, "no_such_column", TimeView(timebase.X_SECONDS))
    assert len(nx) == 0


def test_series_is_aligned_on_run_start(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, duration_s=60, start_unix=1_800_000_000.0)
    run = runs.open_run_dir(run_dir)
    x, _ = timebase.series_xy(run, runs.read_training(run), "step", TimeView(timebase.X_SECONDS))
    assert x[0] == pytest.approx(3.0 + 8.0)  # training starts 3 s after the collector; first step takes 8 s


def test_metric_figure_has_an_svg_trace_per_run_and_gpu(data_dir: Path, run_ids: dict[str, str]) -> None:
    selected = _runs(data_dir, run_ids, "cpu", "gpu")
    cpu_figure = figures.metric_figure(selected, figures.Metric("cpu_util_pct", "CPU", "%"))
    assert [trace.type for trace in cpu_figure.data] == ["scatter", "scatter"]  # not WebGL (figures.py)
    assert [trace.name for trace in cpu_figure.data] == ["cpu baseline", "gpu h100"]
    assert cpu_figure.layout.yaxis.range == (0, 105)
    gpu_figure = figures.metric_figure(selected, figures.COMPONENT_METRICS["gpu"][2])
    assert [trace.name for trace in gpu_figure.data] == ["gpu h100 · gpu0_power_w"]
    assert len(gpu_figure.data[0].y) == 90 and min(gpu_figure.data[0].y) >= 250  # 250 W while idle


def test_metric_figure_without_data_says_so(data_dir: Path, run_ids: dict[str, str]) -> None:
    figure = figures.metric_figure(_runs(data_dir, run_ids, "cpu"), figures.COMPONENT_METRICS["cpu-temp"][0])
    assert not figure.data
    assert "CPU temperature: not recorded" in figure.layout.annotations[0].text
    assert figure.layout.xaxis.visible is False and figure.layout.yaxis.visible is False  # no empty axis


def test_long_series_are_downsampled(tmp_path: Path) -> None:
    run = runs.open_run_dir(
        make_run(tmp_path, duration_s=600, interval_s=0.1, with_training=False, with_eval=False)
    )
    metric = figures.Metric("cpu_util_pct", "CPU", "%")
    figure = figures.metric_figure([run], metric, TimeView(max_points=500))
    assert len(figure.data[0].x) == 500
    zoomed = figures.metric_figure([run], metric, TimeView(x_range=(100.0, 110.0), max_points=500))
    assert 100 <= len(zoomed.data[0].x) <= 103  # the zoomed range at full resolution
    assert list(zoomed.layout.xaxis.range) == [100.0, 110.0]


def test_heatmap_bins_per_core_means(data_dir: Path, run_ids: dict[str, str]) -> None:
    (gpu,) = _runs(data_dir, run_ids, "gpu")
    figure = figures.heatmap_figure(gpu, bins=30)
    heatmap = figure.data[0]
    assert heatmap.type == "heatmap" and list(heatmap.y) == ["cpu0", "cpu1", "cpu2", "cpu3"]
    z = np.array(heatmap.z)
    assert z.shape == (4, 30)
    frame = runs.read_telemetry(gpu)
    first_bin = frame["cpu2_util_pct"][(frame["time_unix"] - gpu.start_unix) < 3.0].mean()
    assert z[2, 0] == pytest.approx(first_bin)


def test_summary_stats_mean_and_peak(data_dir: Path, run_ids: dict[str, str]) -> None:
    cpu, gpu = _runs(data_dir, run_ids, "cpu", "gpu")
    frame = runs.read_telemetry(gpu)
    stats = overview.component_stats(gpu)
    assert stats[("%", "CPU")] == pytest.approx((frame["cpu_util_pct"].mean(), frame["cpu_util_pct"].max()))
    assert stats[("W", "GPU")][1] == pytest.approx(frame["gpu0_power_w"].max())
    assert stats[("°C", "CPU")][0] == pytest.approx(frame["cpu_temp_c"].mean())
    cpu_stats = overview.component_stats(cpu)
    assert ("°C", "CPU") not in cpu_stats and ("%", "GPU") not in cpu_stats  # no reading: no bar, not a zero
    figure = overview.summary_figure([cpu, gpu])
    assert len(figure.data) == 2 * 2 * 3  # runs × (mean, peak) × unit panels
    assert {trace.type for trace in figure.data} == {"bar"}


def test_training_figure_rows(data_dir: Path, run_ids: dict[str, str]) -> None:
    selected = _runs(data_dir, run_ids, "cpu", "gpu")
    figure = overview.training_figure(selected)
    by_axis: dict[str, int] = {}
    for trace in figure.data:
        by_axis[trace.yaxis] = by_axis.get(trace.yaxis, 0) + 1
    assert by_axis == {"y": 2, "y2": 2, "y3": 2, "y4": 3}  # CPU util of both runs, GPU util of one
    step_trace = next(t for t in figure.data if t.yaxis == "y" and t.name == "gpu h100")
    assert step_trace.y[-1] == runs.read_training(selected[1])["step"].iloc[-1]


def test_training_figure_without_training(data_dir: Path, run_ids: dict[str, str]) -> None:
    for name in ("training.csv",):
        (runs.get_run(data_dir, run_ids["gpu"]).path / name).unlink()
    assert overview.training_figure(_runs(data_dir, run_ids, "gpu")) is None  # the view says why, in words


def test_timeseries_columns_and_any_metric(data_dir: Path, run_ids: dict[str, str]) -> None:
    selected = _runs(data_dir, run_ids, "cpu", "gpu")
    columns = figures.timeseries_columns(selected)
    assert columns[0] == "late_ms" and "gpu0_power_w" in columns and "training.loss_total" in columns
    assert "time_unix" not in columns and "training.time_unix" not in columns
    loss = figures.any_metric_figure(selected, "training.loss_total", TimeView(timebase.X_PERCENT))
    assert len(loss.data) == 2 and loss.layout.xaxis.title.text == "% of runtime"
    assert figures.any_metric_figure(selected, None).layout.annotations[0].text == "pick a metric"


@pytest.mark.parametrize(
    ("column", "unit"),
    [("gpu0_power_w", "W"), ("disk_read_bps", "bytes/s"), ("cpu_temp_c", "°C"), ("load1", "")],
)
def test_unit_of(column: str, unit: str) -> None:
    assert figures.unit_of(column) == unit


def test_display_names_are_unique(tmp_path: Path) -> None:
    first = runs.open_run_dir(make_run(tmp_path, label="same", run_id="a-run"))
    second = runs.open_run_dir(make_run(tmp_path, label="same", run_id="b-run"))
    assert figures.display_names([first, second]) == {"a-run": "same (a-run)", "b-run": "same (b-run)"}


def test_rows_out_of_time_order_or_without_time_are_placed_or_dropped(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, duration_s=10, with_training=False, with_eval=False)
    path = run_dir / "telemetry.csv"
    header, *rows = path.read_text().splitlines()
    rows[3], rows[6] = rows[6], rows[3]  # the wall clock stepped back
    rows[8] = "," + rows[8].split(",", 1)[1]  # a row without time_unix
    path.write_text("\n".join([header, *rows]) + "\n")
    run = runs.open_run_dir(run_dir)
    frame = runs.read_telemetry(run)
    x, y = timebase.series_xy(run, frame, "cpu_util_pct", TimeView(timebase.X_SECONDS))
    assert len(x) == 9 and np.all(np.diff(x) > 0)
    by_time = frame.dropna(subset=["time_unix"]).sort_values("time_unix")["cpu_util_pct"].to_numpy()
    assert y.tolist() == by_time.tolist()
    heat = np.array(figures.heatmap_figure(run, bins=9).data[0].z)
    assert np.isfinite(heat).sum() >= 8
