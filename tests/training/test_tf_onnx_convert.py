"""tf2onnx runs its optimizer passes unguarded first (no deep copy of the graph before each), and the
guarded way only when that fails. The real conversion is the TensorFlow run's inference phase
(tests/conftest.py's cpu_script_run); here, what each attempt sees and what is left behind."""

from __future__ import annotations

import os

import pytest

from training.inference.runtimes.onnx_runtime import unguarded_then_guarded

NAME = "TF2ONNX_CATCH_ERRORS"


def test_one_unguarded_conversion_when_it_works(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NAME, raising=False)
    seen: list[str | None] = []
    assert unguarded_then_guarded(lambda: seen.append(os.environ.get(NAME))) is None
    assert seen == ["FALSE"]
    assert NAME not in os.environ


def test_a_failed_unguarded_conversion_runs_again_guarded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NAME, raising=False)
    seen: list[str | None] = []

    def convert() -> None:
        seen.append(os.environ.get(NAME))
        if len(seen) == 1:
            raise ValueError("an optimizer pass broke the graph")

    note = unguarded_then_guarded(convert)
    assert seen == ["FALSE", None]
    assert note == (
        "converted twice: without tf2onnx's guard around each optimizer pass it failed "
        "(an optimizer pass broke the graph)"
    )
    assert NAME not in os.environ


def test_the_guarded_attempts_error_is_the_one_raised_and_the_callers_setting_is_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(NAME, "mine")
    seen: list[str | None] = []

    def convert() -> None:
        seen.append(os.environ.get(NAME))
        raise ValueError(f"attempt {len(seen)}")

    with pytest.raises(ValueError, match="attempt 2"):
        unguarded_then_guarded(convert)
    assert seen == ["FALSE", "mine"]
    assert os.environ[NAME] == "mine"
