"""Run details of a run recorded in a Slurm job: the allocation and why Slurm stopped it."""

from __future__ import annotations

import json
from pathlib import Path

from dashfixtures import make_run
from test_dash_sparse import texts

from dashboard import views


def test_run_details_show_the_slurm_job_and_its_stop(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, host="node07", end_reason="interrupted")
    record = json.loads((run_dir / "run.json").read_text())
    record["system"]["slurm"] = {
        "job_id": "4712",
        "array_job_id": "4711",
        "array_task_id": "1",
        "partition": "gpu",
        "nodelist": "node07",
        "nnodes": 1,
        "node_rank": 0,
        "cpus_per_task": 16,
        "gpus": ["2", "3"],
    }
    record["notes"] = ["stopped by Slurm: cancelled (scancel) (job state COMPLETING)"]
    (run_dir / "run.json").write_text(json.dumps(record))
    (card,) = views.details_view(tmp_path, [run_dir.name])[0].children
    shown = texts([card])
    assert (
        "4712 (array task 4711_1), partition gpu, node 0 of 1 (node07), 16 CPUs per task, GPUs 2, 3" in shown
    )
    assert "Slurm job" in shown
    assert "stopped by Slurm: cancelled (scancel) (job state COMPLETING)" in shown


def test_a_run_outside_slurm_has_no_slurm_row(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path)
    (card,) = views.details_view(tmp_path, [run_dir.name])[0].children
    assert "Slurm job" not in texts([card])
