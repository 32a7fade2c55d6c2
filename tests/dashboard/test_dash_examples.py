"""The curated recordings in data/examples load without a warning and render in every view."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dashboard import detections_view, runs, views

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
    assert run.end_reason in {"completed", "deadline"} or _trained_then_a_later_phase_failed(run.path)
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
    assert options and detections_view.detection_file(tmp_path, run_id, f"{image}.png") is not None
    assert views.details_view(tmp_path, selection)


def _trained_then_a_later_phase_failed(run_dir: Path) -> bool:
    """A run whose training finished and whose failure came after it (the README of data/examples says
    which): phases.csv's train phase ok, every failed phase one of the post-training ones."""
    with (run_dir / "phases.csv").open(encoding="utf-8") as handle:
        phases = list(csv.DictReader(handle))
    failed = {row["phase"] for row in phases if row["status"] != "ok"}
    trained = any(row["phase"] == "train" and row["status"] == "ok" for row in phases)
    return trained and bool(failed) and failed <= {"export", "evaluate", "detect", "infer"}


@pytest.mark.skipif(len(EXAMPLES) < 2, reason="the README's headline picture needs the two shipped runs")
def test_the_readme_headline_of_the_two_shipped_runs(tmp_path: Path, monkeypatch) -> None:
    """The README's picture of the report's top: the command it shows, run from a checkout's root."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "examples").symlink_to(DATA_DIR / "examples")
    monkeypatch.chdir(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "sizing", *EXAMPLES[:2], "--out", "report.html"],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ | {"PYTHONPATH": str(DATA_DIR.parent)},
    )
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    headline = page.split('<ul class="headline">', 1)[1].split("</ul>", 1)[0]
    assert "Baseline: CPU" in headline and "add a GPU run" in headline
