"""One reader of a run directory's JSON files: `read_run(path)` gives the records and one warning per
problem file (unreadable, not a JSON object, of another format version, fields of the wrong type).

Every reader (the collector's summary, sizing, the dashboard) reads through here; the CSV files are left to
readers that parse tables (runformat.layout names them). Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runformat.jsonio import read_object
from runformat.layout import EVAL_JSON, FORMAT_VERSION, INFERENCE_JSON, RUN_JSON, TRAINING_JSON
from runformat.progress import TrainingProgress, progress_of
from runformat.records import InferenceRecord, RunRecord, TrainingRecord, one_warning, raw_of, read_record


@dataclass(frozen=True)
class RunFiles:
    """A run directory's JSON files: a record is None where its file is absent or unreadable."""

    path: Path
    run: RunRecord | None = None
    training: TrainingRecord | None = None
    inference: InferenceRecord | None = None
    evaluation: dict[str, Any] | None = None  # eval.json, as read
    progress: TrainingProgress | None = None  # how far training got (runformat.progress); None without it
    problems: Mapping[str, str] = field(default_factory=dict)  # file name -> its one warning

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(self.problems.values())

    @property
    def meta(self) -> dict[str, Any]:
        """run.json's object ({} without one)."""
        return raw_of(self.run)


def read_run(path: Path) -> RunFiles:
    """run.json, training.json, inference.json and eval.json of `path`, each checked, and training.csv's
    word on how far training got where training.json is there."""
    path = Path(path)
    run, run_problem = read_record(RunRecord, path / RUN_JSON)
    training, training_problem = read_record(TrainingRecord, path / TRAINING_JSON)
    inference, inference_problem = read_record(InferenceRecord, path / INFERENCE_JSON)
    evaluation, eval_problem = read_object(path / EVAL_JSON)
    found = {
        RUN_JSON: one_warning([p for p in (_version_problem(run), run_problem) if p]),
        TRAINING_JSON: training_problem,
        INFERENCE_JSON: inference_problem,
        EVAL_JSON: eval_problem,
    }
    problems = {name: problem for name, problem in found.items() if problem}
    progress = progress_of(path, training, run) if raw_of(training) else None
    return RunFiles(path, run, training, inference, evaluation, progress, problems)


def _version_problem(run: RunRecord | None) -> str | None:
    version = raw_of(run).get("format_version")
    if version in (None, FORMAT_VERSION):
        return None
    return f"{RUN_JSON}: format_version {version!r}, expected {FORMAT_VERSION}"
