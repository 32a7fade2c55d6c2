"""A run whose CSVs a spreadsheet saved: time_unix rounded to the second (`1795518531`), or to scientific
notation (`1.79552E+09`), while elapsed_s kept every row apart. Rows that shared a rounded time were merged
or dropped as one; the times are now rebuilt from elapsed_s and the file's start_unix. And one saved in a
locale that writes `;` between cells and `2,5` for 2.5."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dashboard import runs as dashboard_runs
from sizing.analysis import coarse_times
from sizing.analysis.coarse_times import rounding_step_s, times_from_elapsed
from sizing.analysis.load import load_run_dir
from sizing.cli import main as sizing_main

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "examples"
GPU_RUN, CPU_RUN = "20261124T110829Z-gpu-vm", "20261124T111406Z-cpu-vm"  # the GPU run samples every 100 ms
pytestmark = pytest.mark.skipif(
    not (EXAMPLES / GPU_RUN).is_dir() or not (EXAMPLES / CPU_RUN).is_dir(), reason="no example runs"
)


def copies(tmp_path: Path) -> tuple[Path, Path]:
    runs = tmp_path / "runs"
    for name in (GPU_RUN, CPU_RUN):
        shutil.copytree(EXAMPLES / name, runs / name, ignore=shutil.ignore_patterns("detections"))
    return runs / CPU_RUN, runs / GPU_RUN


def as_a_spreadsheet_saves(run_dir: Path, layout: str) -> None:
    """time_unix of both CSVs written as `layout` formats it; every other cell as it was."""
    for name in ("telemetry.csv", "training.csv"):
        path = run_dir / name
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        frame["time_unix"] = [layout.format(float(t)) if t else t for t in frame["time_unix"]]
        frame.to_csv(path, index=False)


def report(tmp_path: Path, cpu: Path, gpu: Path) -> dict:
    out = tmp_path / f"report-{len(list(tmp_path.glob('report-*')))}.json"
    assert sizing_main([str(cpu), str(gpu), "--out", str(out)]) == 0
    return json.loads(out.read_text())


def resized(tmp_path: Path, change) -> tuple[dict, dict, Path]:
    """The report on copies of the two runs before and after `change` to the GPU run's, and its directory."""
    cpu, gpu = copies(tmp_path)
    original = report(tmp_path, cpu, gpu)
    change(gpu)
    found = report(tmp_path, cpu, gpu)
    assert found["decision"]["options"][0]["line"] == original["decision"]["options"][0]["line"]
    return original, found, gpu


def speedup(found: dict) -> float | None:
    options = found["decision"]["options"]
    return options[0]["speedup"] if options else None


@pytest.mark.parametrize(("layout", "step"), [("{:.0f}", "1 s"), ("{:.5E}", "10,000 s")])
def test_rounded_times_are_rebuilt_and_the_run_reads_as_recorded(
    tmp_path: Path, layout: str, step: str
) -> None:
    cpu, gpu = copies(tmp_path)
    original = report(tmp_path, cpu, gpu)
    recorded = load_run_dir(gpu)
    as_a_spreadsheet_saves(gpu, layout)
    found = report(tmp_path, cpu, gpu)
    assert speedup(found) == pytest.approx(speedup(original), rel=1e-6)
    assert found["decision"]["options"][0]["line"] == original["decision"]["options"][0]["line"]
    said = [w for w in found["warnings"] if "time_unix is rounded to" in w]
    assert len(said) == 2 and all(f"rounded to {step} (" in w for w in said), said
    assert all("Rebuilt from elapsed_s and its start_unix" in w for w in said)
    rebuilt = load_run_dir(gpu)
    for name in ("telemetry", "training"):
        before, after = getattr(recorded, name)["time_unix"], getattr(rebuilt, name)["time_unix"]
        assert len(after) == len(before)  # no row merged into another or left out
        assert np.abs(after.to_numpy() - before.to_numpy()).max() < 1e-5
    dashboard_runs.clear_caches()
    info = dashboard_runs.open_run_dir(gpu)
    assert len(dashboard_runs.read_telemetry(info)) == len(recorded.telemetry)
    assert len(dashboard_runs.read_training(info)) == len(recorded.training)


def test_without_a_start_coarse_times_are_not_read_and_fine_ones_are_guessed(tmp_path: Path) -> None:
    cpu, gpu = copies(tmp_path)
    for name in ("run.json", "training.json"):
        data = json.loads((gpu / name).read_text())
        data.pop("start_unix")
        (gpu / name).write_text(json.dumps(data))
    as_a_spreadsheet_saves(gpu, "{:.5E}")
    found = report(tmp_path, cpu, gpu)
    said = " | ".join(found["warnings"])
    assert "telemetry.csv: time_unix is rounded to 10,000 s" in said
    assert "its rows cannot be placed: not read" in said
    assert "throughput from training.json's totals" in said  # the step log's times are not guessed
    assert speedup(found) == pytest.approx(9.0, abs=0.2)
    frame = pd.DataFrame({"time_unix": [100.0, 100.0, 101.0, 101.0], "elapsed_s": [0.2, 0.7, 1.2, 1.7]})
    rebuilt, warning = times_from_elapsed(frame, "telemetry.csv", None)
    assert warning is not None and "each session's offset within 0.5 s" in warning
    assert np.allclose(np.diff(rebuilt["time_unix"]), 0.5)


def test_times_that_are_not_rounded_or_tie_with_their_elapsed_too_are_left_as_they_are() -> None:
    one_per_second = pd.DataFrame({"time_unix": [1000.0, 1001.0, 1002.0], "elapsed_s": [0.0, 1.0, 2.0]})
    read_together = pd.DataFrame({"time_unix": [5.0, 5.0, 9.0], "elapsed_s": [1.0, 1.0, 5.0]})  # a burst
    cases = ((one_per_second, "telemetry.csv", 999.0), (read_together, "training.csv", 4.0))
    for frame, file, start in cases:
        kept, warning = times_from_elapsed(frame, file, start)
        assert kept is frame and warning is None
    precise = np.array([1795518530.554553, 1795518530.654553])
    assert rounding_step_s(precise) is None and rounding_step_s(np.array([1.79552e9])) == 1e4


def test_a_resumed_step_log_is_rebuilt_session_by_session() -> None:
    """elapsed_s starts again in a resumed session: each session gets its own offset."""
    elapsed = np.array([1.0, 1.5, 2.0, 2.5, 0.5, 1.0, 1.5])
    true = np.concatenate([1000.0 + elapsed[:4], 2000.0 + elapsed[4:]])
    frame = pd.DataFrame({"time_unix": np.round(true), "elapsed_s": elapsed, "step": range(1, 8)})
    rebuilt, warning = times_from_elapsed(frame, "training.csv", 2000.0)  # the last session's start
    assert warning is not None
    assert np.allclose(rebuilt["time_unix"], true, atol=0.5)
    assert np.allclose(rebuilt["time_unix"].to_numpy()[4:], true[4:])


def test_the_guess_stops_past_max_guessed_step() -> None:
    """Rounded to 10 s a median offset is off by 5 s at most: guessed; to 100 s, not placed at all."""
    limit = coarse_times.MAX_GUESSED_STEP_S
    for step, read in ((limit, True), (10 * limit, False)):
        elapsed = np.arange(0.0, 4 * step, step / 4)
        frame = pd.DataFrame({"time_unix": np.round((1e6 + elapsed) / step) * step, "elapsed_s": elapsed})
        rebuilt, warning = times_from_elapsed(frame, "telemetry.csv", None)
        assert warning is not None and (len(rebuilt) == len(frame)) is read, (step, warning)


def as_a_semicolon_locale_saves(run_dir: Path) -> None:
    """Every CSV as a spreadsheet in a locale with the decimal comma saves it: `;` between cells, `2,5`
    for 2.5, CRLF line ends, and time_unix rounded to the second."""
    for name in ("telemetry.csv", "training.csv", "phases.csv"):
        path = run_dir / name
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        if "time_unix" in frame:
            frame["time_unix"] = [f"{float(t):.0f}" if t else t for t in frame["time_unix"]]
        header, *rows = frame.to_csv(index=False).splitlines()
        cells = [[c.replace(".", ",") for c in row.split(",")] for row in rows]
        lines = [header.replace(",", ";")] + [";".join(row) for row in cells]
        path.write_text("\r\n".join(lines) + "\r\n")


def test_a_run_saved_in_a_semicolon_locale_reads_as_recorded(tmp_path: Path) -> None:
    """It read "training.csv has no time_unix and step columns": no step log, no telemetry, no verdict."""
    recorded = load_run_dir(EXAMPLES / GPU_RUN)
    _, found, gpu = resized(tmp_path, as_a_semicolon_locale_saves)
    said = [w for w in found["warnings"] if "cells separated by ';' and ',' as the decimal mark (a spre" in w]
    assert len(said) == 3, found["warnings"]  # telemetry.csv, training.csv, phases.csv
    dashboard_runs.clear_caches()
    info = dashboard_runs.open_run_dir(gpu)
    telemetry = dashboard_runs.read_telemetry(info)
    assert len(telemetry) == len(recorded.telemetry) and telemetry["cpu_util_pct"].notna().all()
    assert dashboard_runs.read_phases(info)["phase"].tolist() == recorded.phases["phase"].tolist()


def test_a_run_saved_as_unicode_text_reads_as_recorded(tmp_path: Path) -> None:
    """A spreadsheet's "Unicode Text": UTF-16 with its mark, tabs between cells. It was decoded, then read
    as one column: "no time_unix column"."""
    cpu, gpu = copies(tmp_path)
    original = report(tmp_path, cpu, gpu)
    for name in ("telemetry.csv", "training.csv", "phases.csv"):
        path = gpu / name
        path.write_bytes(path.read_text().replace(",", "\t").replace("\n", "\r\n").encode("utf-16"))
    found = report(tmp_path, cpu, gpu)
    assert found["decision"]["options"][0]["line"] == original["decision"]["options"][0]["line"]
    assert sum("cells separated by tabs (a spreadsheet saved it)" in w for w in found["warnings"]) == 3
    dashboard_runs.clear_caches()
    telemetry = dashboard_runs.read_telemetry(dashboard_runs.open_run_dir(gpu))
    assert len(telemetry) == len(load_run_dir(gpu).telemetry) > 0


def as_dates(run_dir: Path) -> None:
    """time_unix of both CSVs written as dates (a spreadsheet's cell format, another tool's ISO 8601)."""
    for name, layout in (("telemetry.csv", "%Y-%m-%dT%H:%M:%S.%fZ"), ("training.csv", "%d/%m/%Y %H:%M:%S")):
        path = run_dir / name
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        frame["time_unix"] = pd.to_datetime(frame["time_unix"].astype(float), unit="s").dt.strftime(layout)
        frame.to_csv(path, index=False)


def test_times_written_as_dates_are_rebuilt_from_elapsed_and_the_start(tmp_path: Path) -> None:
    """Every row 'without a time left out': no step log, no energy. elapsed_s and the records' start_unix
    place each row where it was taken."""
    recorded = load_run_dir(EXAMPLES / GPU_RUN)
    _, found, gpu = resized(tmp_path, as_dates)
    said = [w for w in found["warnings"] if "read as no number (dates?" in w]
    assert len(said) == 2 and "run.json's start_unix" in said[0] + said[1], said
    rebuilt = load_run_dir(gpu)
    for name in ("telemetry", "training"):
        before, after = getattr(recorded, name)["time_unix"], getattr(rebuilt, name)["time_unix"]
        assert np.abs(after.to_numpy() - before.to_numpy()).max() < 1e-5
    dashboard_runs.clear_caches()
    assert len(dashboard_runs.read_training(dashboard_runs.open_run_dir(gpu))) == len(recorded.training)


def test_unreadable_times_are_rebuilt_only_where_the_start_fits_them() -> None:
    fit = coarse_times.UNREADABLE_FIT_S
    rows = pd.DataFrame({"time_unix": [np.nan, 1001.0, np.nan], "elapsed_s": [0.0, 1.0, 2.0]})
    for start, rebuilt in ((1000.0, True), (1000.0 - fit + 0.01, True), (1000.0 - fit - 0.01, False)):
        found, said = coarse_times.times_from_start(rows, "telemetry.csv", start, "run.json")
        assert (said is not None) is rebuilt, start
        if rebuilt:
            assert found["time_unix"].tolist() == pytest.approx([start, 1001.0, start + 2.0])
    resumed = pd.DataFrame({"time_unix": [np.nan, np.nan, np.nan], "elapsed_s": [0.0, 1.0, 0.5]})
    assert coarse_times.times_from_start(resumed, "training.csv", 1000.0, "training.json")[1] is None
    assert coarse_times.times_from_start(rows, "telemetry.csv", None, "run.json")[1] is None


def step_log_in_a_zone(seconds: float):
    def change(run_dir: Path) -> None:
        path = run_dir / "training.csv"
        frame = pd.read_csv(path)
        frame["time_unix"] += seconds
        frame.to_csv(path, index=False)

    return change


@pytest.mark.parametrize("seconds", [3600.0, -5.5 * 3600])
def test_a_step_log_stamped_in_local_time_is_moved_to_its_records_clock(
    tmp_path: Path, seconds: float
) -> None:
    """`datetime.utcnow().timestamp()` reads UTC as local time: the step log fell an hour off its collector's
    records ("their clocks disagree"), and the run lost its energy per example."""
    original, found, _ = resized(tmp_path, step_log_in_a_zone(seconds))
    assert found["decision"]["caveats"] == original["decision"]["caveats"]
    hours = f"{abs(seconds) / 3600:g} h {'ahead of' if seconds > 0 else 'behind'}"
    assert any(
        f"training.csv: time_unix is {hours} training.json's start_unix" in w for w in found["warnings"]
    )


def test_only_a_whole_quarter_hour_within_the_fit_and_the_zones_is_a_zone() -> None:
    fit, step, most = coarse_times.UNREADABLE_FIT_S, coarse_times.ZONE_STEP_S, coarse_times.MAX_ZONE_OFFSET_S
    cases = ((step + fit - 0.01, True), (step + fit + 0.01, False), (most, True), (most + step, False))
    for off, moved in cases:
        rows = pd.DataFrame({"time_unix": [1000.0 + off, 1001.0 + off], "elapsed_s": [0.0, 1.0]})
        found, said = coarse_times.times_in_another_zone(rows, "training.csv", 1000.0, "training.json")
        assert (said is not None) is moved, off
        if moved:
            assert found["time_unix"].tolist() == pytest.approx(
                [1000.0 + off - round(off / step) * step] * 1 + [1001.0 + off - round(off / step) * step]
            )


def in_milliseconds(run_dir: Path) -> None:
    """Both CSVs' time_unix as `time.time_ns() // 1_000_000` (another tool's logger) would write it."""
    for name in ("telemetry.csv", "training.csv"):
        frame = pd.read_csv(run_dir / name)
        frame["time_unix"] = (frame["time_unix"] * 1000).round(3)
        frame.to_csv(run_dir / name, index=False)


def test_times_in_milliseconds_read_in_seconds(tmp_path: Path) -> None:
    """Every row "past the year 9999 left out": no step log, no telemetry, no energy and no verdict. Read in
    seconds, where that fits the records' start_unix + elapsed_s, the run reads as recorded."""
    original, found, gpu = resized(tmp_path, in_milliseconds)
    assert found["decision"]["caveats"] == original["decision"]["caveats"]
    said = [w for w in found["warnings"] if "time_unix is in milliseconds since 1970" in w]
    assert len(said) == 2, found["warnings"]
    dashboard_runs.clear_caches()
    run = dashboard_runs.open_run_dir(gpu)
    assert len(dashboard_runs.read_telemetry(run)) == len(load_run_dir(EXAMPLES / GPU_RUN).telemetry)


def test_finer_units_are_read_only_where_they_fit_the_start() -> None:
    fit = coarse_times.UNREADABLE_FIT_S
    for scale, unit in coarse_times.FINER_UNITS:
        for start, read in ((1e9, True), (1e9 - fit + 0.01, True), (1e9 - fit - 0.01, False)):
            rows = pd.DataFrame({"time_unix": [1e9 * scale, (1e9 + 1) * scale], "elapsed_s": [0.0, 1.0]})
            found, said = coarse_times.times_in_finer_units(rows, "training.csv", start, "training.json")
            assert (said is not None) is read, (unit, start)
            if read:
                assert unit in said and found["time_unix"].tolist() == pytest.approx([1e9, 1e9 + 1])
    seconds = pd.DataFrame({"time_unix": [1e9, 1e12], "elapsed_s": [0.0, 1.0]})  # one cell in seconds
    assert coarse_times.times_in_finer_units(seconds, "training.csv", 1e9, "training.json")[1] is None
    ms = pd.DataFrame({"time_unix": [1e12, 1e12 + 1000], "elapsed_s": [0.0, 1.0]})
    assert coarse_times.times_in_finer_units(ms, "training.csv", None, "training.json")[1] is None
