"""The user's own training job on real third-party training code, offline on this CPU: Keras model.fit,
Lightning's Trainer, a Hugging Face Trainer, a plain PyTorch loop and a plain tqdm script, each recorded by
`collect timed ... -- COMMAND` and sized by the real report. The shipped --progress-format patterns are
checked against the lines these libraries printed in the run (command.log), never hand-written ones."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from collect.joblines import LineScanner
from collect.jobpatterns import compile_patterns
from collect.jobsteps import Step, StepCounter
from runformat import read_json
from sizing.cli import main as sizing_main

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "tests" / "jobscripts"
PY = sys.executable


def _record(tmp_path: Path, options: list[str], command: list[str], env: dict | None = None) -> Path:
    """`python -m collect timed 240s OPTIONS -- COMMAND` (the job ends long before); its run directory."""
    data = tmp_path / "data"
    result = subprocess.run(
        [PY, "-m", "collect", "timed", "240s", "--interval", "0.5s", "--data-dir", str(data), *options,
         "--", *command],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return sorted((data / "runs").iterdir())[-1]


def _rows(run: Path) -> list[dict]:
    with (run / "training.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


def _format_steps(log: bytes, format_name: str) -> list[Step]:
    """The steps the shipped format finds in the library's own output, read as the collector reads it."""
    patterns = compile_patterns(None, format_name)
    counter, found = StepCounter(patterns.has_epoch), []

    def on_match(groups: dict[str, str]) -> None:
        step = counter.feed(groups, 0.0)
        if step is not None and step.step > (found[-1].step if found else 0):
            found.append(step)

    scanner = LineScanner(patterns, on_match)
    scanner.feed(log)
    scanner.close()
    return found


def _sized(tmp_path: Path, *runs: Path) -> str:
    """The sizing report over the runs; each is in its table with a steady rate from its step log."""
    out = tmp_path / "report.md"
    assert (
        sizing_main(["--data-dir", str(runs[0].parents[1]), "--out", str(out), *(r.name for r in runs)]) == 0
    )
    report = out.read_text()
    for run in runs:
        row = next(line for line in report.splitlines() if line.startswith(f"| {run.name} |"))
        assert "| step log |" in row, row
        assert "no progress seen" not in report
    return report


def test_keras_fit_untouched_through_the_keras_format_and_with_the_callback(tmp_path: Path) -> None:
    pytest.importorskip("keras")
    script = [PY, str(SCRIPTS / "keras_fit.py"), "--rows", "1024", "--batch", "32", "--epochs", "3"]
    same = ["--workload-name", "keras-mlp", "--batch", "32"]
    untouched = _record(tmp_path, ["--progress-format", "keras", *same], script)
    rows = _rows(untouched)
    assert int(rows[-1]["step"]) == 3 * 1024 // 32 and len(rows) >= 3  # Keras prints every epoch's end
    assert rows[-1]["loss_total"] and float(rows[-1]["examples_per_s"]) > 0
    assert read_json(untouched / "training.json")["progress"]["from"] == "output"

    with_callback = _record(tmp_path, [*same], [*script, "--callback"])
    rows = _rows(with_callback)
    assert [int(r["step"]) for r in rows] == list(range(1, 97))
    assert [int(r["examples"]) for r in rows[:3]] == [32, 64, 96] and rows[-1]["loss_total"]
    training = read_json(with_callback / "training.json")
    assert (training["framework"], training["precision"], training["batch_size"]) == (
        "tensorflow",
        "float32",
        32,
    )
    assert training["library"].startswith("keras 3.")
    found = _format_steps((with_callback / "command.log").read_bytes(), "keras")
    assert found[-1].step == 96 and found[-1].loss is not None  # the same run's real Keras lines agree

    report = _sized(tmp_path, untouched, with_callback)
    assert "keras-mlp [batch 32, dtype not declared]" in report
    assert "not known to be like-for-like (framework, precision unknown)" in report


def test_lightning_trainer_with_its_callback_and_both_of_its_bars(tmp_path: Path) -> None:
    pytest.importorskip("lightning")
    run = _record(tmp_path, ["--progress-format", "lightning"], [PY, str(SCRIPTS / "lightning_fit.py")])
    rows = _rows(run)
    assert [int(r["step"]) for r in rows] == list(
        range(1, 33)
    )  # 2 epochs of 16 batches; the 2nd fit is behind
    assert [int(r["examples"]) for r in rows[:2]] == [16, 32] and rows[-1]["loss_total"]
    training = read_json(run / "training.json")
    assert (training["framework"], training["precision"]) == ("torch", "float32")
    assert training["library"].startswith("lightning ") and training["progress"]["output_steps_ignored"] > 0
    rich, _, tqdm = (run / "command.log").read_bytes().partition(b"=== the same fit under the tqdm bar ===")
    for bar in (rich, tqdm):
        found = _format_steps(bar, "lightning")
        assert found[-1].step == 32 and found[-1].loss is not None and len(found) >= 3
    _sized(tmp_path, run)


def test_hugging_face_trainer_on_a_tiny_random_bert(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    steps = 20
    command = [PY, str(SCRIPTS / "hf_train.py"), str(tmp_path / "hf-out"), str(steps)]
    run = _record(tmp_path, ["--progress-format", "hf"], command, env={"HF_HUB_OFFLINE": "1"})
    rows = _rows(run)
    assert [int(r["step"]) for r in rows] == list(range(1, steps + 1))
    assert [int(r["examples"]) for r in rows[:2]] == [8, 16]
    assert [i + 1 for i, r in enumerate(rows) if r["loss_total"]] == [
        6,
        11,
        16,
    ]  # logged every 5, on the next
    training = read_json(run / "training.json")
    assert (training["framework"], training["precision"], training["batch_size"]) == ("torch", "float32", 8)
    found = _format_steps((run / "command.log").read_bytes(), "hf")
    assert found[-1].step == steps and any(step.loss is not None for step in found)
    _sized(tmp_path, run)


def test_a_plain_torch_loop_with_the_five_line_protocol(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    command = [PY, str(SCRIPTS / "torch_loop.py"), "--steps", "200", "--batch", "64", "--malformed"]
    run = _record(tmp_path, [], command)
    rows = _rows(run)
    assert [int(r["step"]) for r in rows] == list(range(1, 201))
    assert int(rows[-1]["examples"]) == 200 * 64 and all(r["loss_total"] for r in rows)
    progress = read_json(run / "training.json")["progress"]
    assert (progress["from"], progress["protocol_malformed"]) == ("protocol", 1)
    assert "1 malformed progress protocol lines skipped" in _sized(tmp_path, run)


def test_a_plain_script_through_the_tqdm_format(tmp_path: Path) -> None:
    pytest.importorskip("tqdm")
    run = _record(tmp_path, ["--progress-format", "tqdm"], [PY, str(SCRIPTS / "tqdm_loop.py"), "3", "40"])
    rows = _rows(run)
    assert int(rows[-1]["step"]) == 120 and len(rows) >= 6 and rows[-1]["loss_total"]
    assert [int(r["step"]) for r in rows] == sorted({int(r["step"]) for r in rows})
    report = _sized(tmp_path, run)
    assert "examples per step not known" in report  # no --batch, no examples: steps/s, said so
