"""runformat.read_run: the run directory's JSON files as typed records, one warning per problem file."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from runformat import ENDED_UNRECORDED, RunFiles, read_run
from runformat.records import (
    COUNT,
    LAST_UNIX_S,
    UNIX_TIME,
    CellRecord,
    InferenceRecord,
    RunRecord,
    SystemRecord,
    TrainingRecord,
    is_count,
    is_unix_time,
    spec,
)

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(p for p in (REPO / "data" / "examples").iterdir() if p.is_dir())


def _write(run_dir: Path, **files: object) -> Path:
    run_dir.mkdir(exist_ok=True)
    for name, content in files.items():
        path = run_dir / f"{name}.json"
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return run_dir


def test_every_shipped_example_reads_without_a_warning() -> None:
    assert EXAMPLES
    for run_dir in EXAMPLES:
        files = read_run(run_dir)
        assert files.warnings == (), run_dir.name
        assert files.run is not None and files.training is not None
        assert files.run.system is not None and files.run.system.cpu_model
        assert files.progress is not None and files.progress.steps == files.training.steps


def test_an_empty_directory_has_no_record_and_no_warning(tmp_path: Path) -> None:
    files = read_run(tmp_path)
    assert files == RunFiles(tmp_path)
    assert (files.run, files.training, files.inference, files.evaluation, files.progress) == (None,) * 5
    assert files.meta == {} and files.warnings == ()


def test_missing_fields_are_none_and_unknown_fields_are_kept(tmp_path: Path) -> None:
    run = {"device": "gpu", "novel_field": {"kept": [1, 2]}, "system": {"cpu_model": "X", "future": 3}}
    files = read_run(_write(tmp_path, run=run, training={"status": "completed", "steps": 12.0}))
    assert files.warnings == ()
    assert files.run.device == "gpu" and files.run.host is None and files.run.start_unix is None
    assert files.run.raw["novel_field"] == {"kept": [1, 2]} and files.meta == run
    assert files.run.system.cpu_model == "X" and files.run.system.cpu_cores_logical is None
    assert files.run.system.raw["future"] == 3 and files.run.system.gpus is None
    assert files.training.steps == 12 and isinstance(files.training.steps, int)
    assert files.training.batch_size is None and files.training.steady_steps_per_s is None  # unknown, not 0


@pytest.mark.parametrize(
    ("content", "warning"),
    [
        ("", "run.json is unreadable (JSONDecodeError: Expecting value: line 1 column 1 (char 0))"),
        ("[1, 2]", "run.json is not a JSON object"),
        ('"done"', "run.json is not a JSON object"),
        (b"\xc3\x28{}", "run.json is unreadable (UnicodeDecodeError"),
    ],
)
def test_an_unreadable_file_is_one_warning_no_record(tmp_path: Path, content: object, warning: str) -> None:
    run_dir = _write(tmp_path, training={"status": "completed"})
    (run_dir / "run.json").write_bytes(content if isinstance(content, bytes) else content.encode())
    files = read_run(run_dir)
    assert files.run is None and files.meta == {}
    assert len(files.warnings) == 1 and files.warnings[0].startswith(warning)
    assert files.problems.keys() == {"run.json"}
    assert files.training.status == "completed"  # the other files are read as usual


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16"])
def test_a_json_file_saved_with_a_byte_order_mark_reads_as_itself(tmp_path: Path, encoding: str) -> None:
    """A run.json whose label was edited in a Windows editor comes back with a byte-order mark (UTF-8's, or
    UTF-16 as "Unicode"): it was unreadable, so the run lost its device and hardware; the CSVs were
    already read through such marks."""
    shipped = EXAMPLES[0]
    for name in ("run.json", "training.json"):
        text = (shipped / name).read_text(encoding="utf-8")
        (tmp_path / name).write_bytes(text.replace("\n", "\r\n").encode(encoding))
    files, original = read_run(tmp_path), read_run(shipped)
    assert files.warnings == ()
    assert files.meta == original.meta and files.training.raw == original.training.raw


def test_fields_of_the_wrong_type_are_unknown_with_one_warning_for_the_file(tmp_path: Path) -> None:
    run = {
        "host": 7,
        "label": "kept",
        "system": {"cpu_cores_logical": "two", "gpus": [{"name": "H100"}, "not a gpu", {"index": "0"}]},
    }
    training = {"batch_size": 2.5, "precision": 16, "flops": {"per_example": "many"}, "steps": 10}
    files = read_run(_write(tmp_path, run=run, training=training))
    run_warning, training_warning = files.problems["run.json"], files.problems["training.json"]
    assert len(files.warnings) == 2
    assert run_warning == (
        "run.json field host is a number, not text: read as unknown; "
        "run.json field system.cpu_cores_logical is text, not a whole number ≥ 0: read as unknown; "
        "run.json field system.gpus[1] is text, not an object: ignored; "
        "run.json field system.gpus[2].index is text, not a number: read as unknown"
    )
    assert "training.json field batch_size is a number, not a whole number ≥ 0" in training_warning
    assert "training.json field precision is a number, not text" in training_warning
    assert "training.json field flops.per_example is text, not a number" in training_warning
    assert files.run.host is None and "host" not in files.run.raw and files.run.label == "kept"
    assert [gpu.name for gpu in files.run.system.gpus] == ["H100", None]
    assert files.training.batch_size is None and files.training.flops.per_example is None
    assert files.training.steps == 10


def test_another_format_version_is_said_in_the_files_one_warning(tmp_path: Path) -> None:
    files = read_run(_write(tmp_path, run={"format_version": 2, "interval_s": "1s"}))
    assert files.warnings == (
        "run.json: format_version 2, expected 1; "
        "run.json field interval_s is text, not a number: read as unknown",
    )
    assert read_run(_write(tmp_path, run={"format_version": 1})).warnings == ()


def test_inference_json_is_checked_down_to_its_cells(tmp_path: Path) -> None:
    inference = {
        "device": "gpu",
        "model": {"parameters": "15M"},
        "runtimes": [
            {"runtime": "tf-savedmodel", "available": True,
             "cells": [{"batch_size": 4, "images_per_s": 200.0}, {"batch_size": 8, "images_per_s": "fast"}]},
            {"runtime": "torchscript", "available": False, "reason": "no model"},
            3,
        ],
    }  # fmt: skip
    files = read_run(_write(tmp_path, inference=inference))
    record = files.inference
    assert isinstance(record, InferenceRecord) and record.device == "gpu" and record.model.parameters is None
    savedmodel, torchscript = record.runtimes
    assert [cell.batch_size for cell in savedmodel.cells] == [4, 8]
    assert savedmodel.measured == (CellRecord(batch_size=4, images_per_s=200.0),)
    assert torchscript.available is False and torchscript.measured == ()
    (warning,) = files.warnings
    assert warning.count("inference.json field") == 3
    assert "runtimes[0].cells[1].images_per_s is text" in warning and "runtimes[2] is a number" in warning


def test_progress_comes_with_the_records(tmp_path: Path) -> None:
    run_dir = _write(tmp_path, run={"end_reason": "failed"}, training={"status": "running", "steps": 1})
    (run_dir / "training.csv").write_text("time_unix,step\n1.0,1\n2.0,2\n3.0,3\n")
    files = read_run(run_dir)
    assert files.progress.status == ENDED_UNRECORDED and files.progress.steps == 3
    assert read_run(_write(tmp_path / "none", run={})).progress is None  # no training.json


def test_an_unreadable_eval_json_is_its_own_warning(tmp_path: Path) -> None:
    run_dir = _write(tmp_path, eval="{", run={"device": "cpu"})
    files = read_run(run_dir)
    assert files.evaluation is None and list(files.problems) == ["eval.json"]


def test_declared_types_are_the_checks() -> None:
    assert spec(TrainingRecord)["steps"] == (COUNT, None)
    assert spec(RunRecord)["system"][1] is SystemRecord
    assert is_count(3) and is_count(3.0) and not is_count(-1) and not is_count(2.5) and not is_count(True)
    assert not is_count(2**53 + 2)  # beyond what a float holds exactly


def test_a_time_in_milliseconds_is_unknown_not_a_date_past_the_year_9999(tmp_path: Path) -> None:
    """start_unix × 1000 read as seconds lies 57,000 years on: the run and its training "not one run's"."""
    start = 1_795_518_531.25
    files = read_run(_write(tmp_path, run={"start_unix": start * 1000, "end_unix": LAST_UNIX_S}))
    assert files.warnings == (
        "run.json field start_unix is a number, not seconds since 1970 before the year 10000 "
        "(milliseconds?): read as unknown",
    )
    assert files.run.start_unix is None and files.run.end_unix == LAST_UNIX_S
    assert spec(TrainingRecord)["end_unix"] == spec(InferenceRecord)["start_unix"] == (UNIX_TIME, None)
    assert spec(CellRecord)["end_unix"] == (UNIX_TIME, None)
    assert is_unix_time(0) and not is_unix_time(-1) and not is_unix_time(LAST_UNIX_S + 1)


def test_a_pid_no_process_can_have_is_not_a_crash(tmp_path: Path) -> None:
    training = {"status": "running", "steps": 1, "pid": 1e20, "host": socket.gethostname()}
    files = read_run(_write(tmp_path, run={"end_reason": "running"}, training=training))
    assert files.progress.status == "running" and not files.progress.stale  # cannot be told: not stale
