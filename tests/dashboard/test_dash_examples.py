"""The curated recordings in data/examples load without a warning and render in every view."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboard import runs, views

DATA_DIR = Path(__file__).resolve().parents[2] / "data"
EXAMPLES = sorted(p.name for p in (DATA_DIR / "examples").glob("*") if p.is_dir())


@pytest.mark.skipif(not EXAMPLES, reason="no recording under data/examples yet")
@pytest.mark.parametrize("run_id", EXAMPLES)
def test_example_run_loads_cleanly_and_renders(run_id: str) -> None:
    run = runs.get_run(DATA_DIR, run_id)
    assert run is not None and run.kind == "examples"
    assert runs.run_warnings(run) == []
    assert len(runs.read_telemetry(run)) > 0 and len(runs.read_training(run)) > 0
    assert run.end_reason in {"completed", "deadline"} and run.duration_s
    selection = [run_id]
    timeseries = views.timeseries_figure(DATA_DIR, selection, "cpu_util_pct", "seconds", [0, 100], None)
    assert len(timeseries.data[0].x) > 0
    for component in views.COMPONENT_TABS:
        assert views.component_view(DATA_DIR, selection, component, "seconds", [0, 100])
    training = views.training_view(DATA_DIR, selection, "percent", [0, 100])
    assert any(len(trace.x) for trace in training[1].figure.data)
    assert views.summary_view(DATA_DIR, selection, [0, 100])[0].figure.data
    assert views.details_view(DATA_DIR, selection)
