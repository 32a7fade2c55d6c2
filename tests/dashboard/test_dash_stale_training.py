"""The dashboard and the sizing report take steps from training.csv when training.json is stale."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

from dashboard import runs
from sizing.analysis.load import load_runs

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "data" / "examples" / "20261121T141926Z-cpu-vm"


def _killed_copy(data_dir: Path) -> tuple[str, int]:
    """The shipped example as if its training had been killed -9 before its last word."""
    run_dir = data_dir / "runs" / "20261121T141926Z-cpu-killed"
    shutil.copytree(EXAMPLE, run_dir, ignore=shutil.ignore_patterns("detections", "eval.json"))
    training = json.loads((run_dir / "training.json").read_text())
    training.update(status="running", steps=0, global_step=0, last_checkpoint=None)
    (run_dir / "training.json").write_text(json.dumps(training))
    with (run_dir / "training.csv").open(newline="") as handle:
        rows = len(list(csv.DictReader(handle)))
    return run_dir.name, rows


def test_dashboard_shows_steps_from_training_csv_and_says_why(tmp_path: Path) -> None:
    run_id, rows = _killed_copy(tmp_path)
    runs.clear_caches()
    run = runs.get_run(tmp_path, run_id)
    assert run is not None
    assert (run.training["steps"], run.training["global_step"]) == (rows, rows)
    assert run.training["status"] == "ended unrecorded"
    assert any("still says running but the training process is gone" in w for w in run.warnings)


def test_sizing_report_carries_the_note(tmp_path: Path) -> None:
    run_id, rows = _killed_copy(tmp_path)
    runs.clear_caches()
    (loaded,) = load_runs(tmp_path, [run_id])
    assert loaded.training_info["steps"] == rows
    assert any("training process is gone" in w for w in loaded.warnings)
