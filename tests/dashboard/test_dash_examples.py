"""The curated recordings in data/examples load without a warning and render in every view."""

from __future__ import annotations

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
    assert run.end_reason in {"completed", "deadline"} and run.duration_s
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
