"""A job whose step log came in bursts (runformat.bursts): the Training tab says its per-row rates are the
collector's reading speed, where the chart alone shows spikes of thousands of steps/s."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from dashfixtures import DEFAULT_START, make_run
from test_dash_sparse import texts

from dashboard import views
from dashboard.runs import clear_caches

JOB = {"workload": {"name": "python train.py", "from": "command line"}, "progress": {"from": "output"}}


def _as_job(run_dir: Path, times: np.ndarray) -> None:
    training = json.loads((run_dir / "training.json").read_text(encoding="utf-8"))
    (run_dir / "training.json").write_text(json.dumps({**training, **JOB, "start_unix": DEFAULT_START}))
    rows = {"time_unix": times, "elapsed_s": times - DEFAULT_START, "step": np.arange(1, times.size + 1)}
    pd.DataFrame(rows).to_csv(run_dir / "training.csv", index=False)


def test_a_jobs_step_log_in_bursts_is_said_in_the_training_tab(data_dir: Path) -> None:
    buffered = make_run(data_dir, run_id="20261121T130255Z-cpu-buffered", label="buffered job")
    flush = np.repeat(DEFAULT_START + 10.0 + 2.5 * np.arange(1, 21), 100)  # 20 buffers of 100 lines
    _as_job(buffered, flush + np.tile(np.arange(100) * 2e-5, 20))
    timed = make_run(data_dir, run_id="20261121T130255Z-cpu-timed", label="timed job")
    _as_job(timed, DEFAULT_START + 10.0 + 0.025 * np.arange(1, 2001))
    clear_caches()
    said = [t for t in texts(views.training_view(data_dir, [buffered.name, timed.name], "seconds", [0, 100]))
            if "burst" in t]  # fmt: skip
    assert len(said) == 1 and said[0].startswith("buffered job: its step log came in 20 bursts")
    assert "python -u" in said[0]
