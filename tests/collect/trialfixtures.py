"""Trial run directories as a `--tune` trial leaves them (training.json, training.csv), written here."""

from __future__ import annotations

import json
from pathlib import Path

CSV_HEADER = (
    "time_unix,elapsed_s,step,loss_total,loss_rpn_score,loss_rpn_box,loss_frcnn_cls,loss_frcnn_box,"
    "loss_model,learning_rate,step_time_s,examples_per_s\n"
)


def write_trial(
    run_dir: Path,
    *,
    batch: int = 2,
    step_s: float = 0.5,
    steps: int = 60,
    warmup_steps: int = 20,
    losses: list[float] | None = None,
    status: str = "completed",
    error: str | None = None,
    threads: int | None = None,
    threads_key: str = "torch_threads",
) -> Path:
    """A trial of `steps` steps of `step_s` each at global batch `batch` (its first step 2 s longer);
    training.json's steady rate is what the steps say, as the training computes it."""
    run_dir.mkdir(parents=True)
    losses = losses if losses is not None else [2.0 - 1.0 * i / max(steps, 1) for i in range(steps)]
    rows, elapsed = [], 0.0
    for index in range(steps):
        elapsed += step_s + (2.0 if index == 0 else 0.0)
        loss = losses[index]
        rate = batch / step_s
        rows.append(f"{1.8e9 + elapsed},{elapsed},{index + 1},{loss},0,0,0,0,{loss},0.01,{step_s},{rate}\n")
    (run_dir / "training.csv").write_text(CSV_HEADER + "".join(rows))
    steady = 1.0 / step_s if steps > warmup_steps else None
    training = {
        "status": status,
        "error": error,
        "batch_size": batch,
        "steps": steps,
        "warmup_steps_excluded": warmup_steps if steps else 0,
        "steady_steps_per_s": steady,
        "steady_examples_per_s": steady * batch if steady else None,
    }
    if threads is not None:
        training[threads_key] = threads
    (run_dir / "training.json").write_text(json.dumps(training))
    run = {"device": "gpu", "end_reason": "completed", "exit_code": 0}
    (run_dir / "run.json").write_text(json.dumps(run))
    return run_dir
