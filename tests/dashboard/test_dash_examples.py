"""The curated recordings in data/examples load without a warning and render in every view."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dashboard import detections_view, runs, views
from sizing.analysis.runchecks import trained_first

DATA_DIR = Path(__file__).resolve().parents[2] / "data"
EXAMPLES = sorted(p.name for p in (DATA_DIR / "examples").glob("*") if p.is_dir())


@pytest.mark.skipif(not EXAMPLES, reason="no recording under data/examples yet")
@pytest.mark.parametrize("run_id", EXAMPLES)
def test_example_run_loads_cleanly_and_renders(run_id: str, tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(DATA_DIR / "examples")  # the shipped copy, not a local data/runs one
    run = runs.get_run(tmp_path, run_id)
    assert run is not None and run.kind == "examples"
    assert runs.run_warnings(run) == []
    assert len(runs.read_telemetry(run)) > 0 and len(runs.read_training(run)) > 0
    trained = trained_first(runs.read_phases(run))  # a later phase failed: data/examples' README says which
    assert run.end_reason in {"completed", "deadline"} or trained
    assert run.duration_s
    selection = [run_id]
    timeseries = views.timeseries_figure(tmp_path, selection, "cpu_util_pct", "seconds", [0, 100], None)
    assert len(timeseries.data[0].x) > 0
    for component in views.COMPONENT_TABS:
        assert views.component_view(tmp_path, selection, component, "seconds", [0, 100])
    training = views.training_view(tmp_path, selection, "percent", [0, 100])
    assert any(len(trace.x) for trace in training[1].figure.data)
    assert views.summary_view(tmp_path, selection, [0, 100])[0].figure.data
    options, image = detections_view.image_choices(tmp_path, selection, None)
    if (run.path / "detections").is_dir():
        assert options and detections_view.detection_file(tmp_path, run_id, f"{image}.png") is not None
    else:  # recorded with --no-export
        assert options == [] and not _has_phase(run.path, "detect")
    assert views.details_view(tmp_path, selection)


README_HEADLINE_RUNS = ["20261124T111406Z-cpu-vm", "20261124T110829Z-gpu-vm"]
TWO_CORE_CPU_RUNS = ["20261121T141926Z-cpu-vm", "20261121T144752Z-cpu-vm"]


def _headline(tmp_path: Path, monkeypatch, run_ids: list[str]) -> str:
    """The report's headline from the command the README shows, run from a checkout's root."""
    (tmp_path / "data").mkdir(exist_ok=True)
    if not (tmp_path / "data" / "examples").exists():
        (tmp_path / "data" / "examples").symlink_to(DATA_DIR / "examples")
    monkeypatch.chdir(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "sizing", *run_ids, "--out", "report.html"],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ | {"PYTHONPATH": str(DATA_DIR.parent)},
    )
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    return page.split('<ul class="headline">', 1)[1].split("</ul>", 1)[0]


@pytest.mark.skipif(
    not set(README_HEADLINE_RUNS + TWO_CORE_CPU_RUNS) <= set(EXAMPLES),
    reason="the README's runs are not shipped",
)
def test_the_readme_headline_of_the_shipped_runs(tmp_path: Path, monkeypatch) -> None:
    """The README's picture of the report's top (the H100 against its host's CPUs), and what it says of
    CPU runs alone."""
    headline = _headline(tmp_path, monkeypatch, README_HEADLINE_RUNS)
    assert "Baseline: CPU" in headline and "16 logical CPUs" in headline and "drifted +9%" in headline
    assert "9.04× the baseline" in headline and "GPU board only: CPU not measured" in headline
    assert "GPU underused" in headline and "GPU not priced" in headline
    cpu_only = _headline(tmp_path, monkeypatch, TWO_CORE_CPU_RUNS)
    assert "Baseline: CPU" in cpu_only and "add a GPU run" in cpu_only


def _has_phase(run_dir: Path, phase: str) -> bool:
    return any(row["phase"] == phase for row in csv.DictReader((run_dir / "phases.csv").open()))
