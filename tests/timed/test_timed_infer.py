"""`collect timed` and the inference phase: --no-infer reaches the training; the summary names runtimes."""

from __future__ import annotations

import json
from pathlib import Path

from collect.session import SessionResult
from collect.timed import build_parser, summary_lines, training_command


def test_no_infer_is_passed_to_the_training() -> None:
    assert "--no-infer" in training_command(build_parser().parse_args(["10s", "--no-infer"]))
    assert "--no-infer" not in training_command(build_parser().parse_args(["10s"]))


def test_summary_names_each_runtime_best_rate_or_na(tmp_path: Path) -> None:
    cells = [{"batch_size": 1, "images_per_s": 8.5}, {"batch_size": 4, "images_per_s": 12.25}]
    runtimes = [
        {"runtime": "tf-savedmodel", "available": True, "cells": cells},
        {"runtime": "torchscript", "available": False, "reason": "no TorchScript model"},
    ]
    (tmp_path / "inference.json").write_text(json.dumps({"runtimes": runtimes}))
    result = SessionResult(run_dir=tmp_path, exit_code=0, end_reason="completed", samples=3)
    lines = summary_lines(result, {})
    assert "  inference: tf-savedmodel 12.2 images/s (batch 4), torchscript n/a" in lines


def test_summary_warns_of_a_training_that_diverged(tmp_path: Path) -> None:
    (tmp_path / "training.json").write_text(json.dumps({"status": "deadline", "steps": 3, "start_unix": 0.0}))
    rows = ["time_unix,elapsed_s,step,loss_total", "1.0,1.0,1,0.9", "2.0,2.0,2,nan", "3.0,3.0,3,inf"]
    (tmp_path / "training.csv").write_text("\n".join(rows) + "\n")
    result = SessionResult(run_dir=tmp_path, exit_code=0, end_reason="completed", samples=3)
    warning = "  warning: the loss was not finite (nan or inf) from step 2 to the end: the training diverged"
    assert any(line.startswith(warning) for line in summary_lines(result, {}))
    (tmp_path / "training.csv").write_text("\n".join([*rows, "4.0,4.0,4,0.8"]) + "\n")
    assert not any("diverged" in line for line in summary_lines(result, {}))
