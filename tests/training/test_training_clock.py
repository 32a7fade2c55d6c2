"""First-step and steady-state figures from step end times."""

from __future__ import annotations

import pytest

from training.trainer import DEFAULT_WARMUP_EXCLUDED, StepClock


def _clock(first_step_s: float, steady_step_s: float, steps: int) -> StepClock:
    ends = [100.0 + first_step_s + i * steady_step_s for i in range(steps)]
    return StepClock(start_unix=100.0, ends=ends)


def test_first_step_includes_tracing_and_steady_state_excludes_warmup() -> None:
    clock = _clock(first_step_s=11.0, steady_step_s=0.4, steps=100)
    assert clock.first_step_s() == pytest.approx(11.0)
    assert clock.warmup_excluded() == DEFAULT_WARMUP_EXCLUDED
    assert clock.steady_steps_per_s() == pytest.approx(2.5)


def test_warmup_steps_are_left_out_even_when_slow() -> None:
    clock = _clock(first_step_s=11.0, steady_step_s=0.4, steps=100)
    for i in range(1, DEFAULT_WARMUP_EXCLUDED):  # slow warm-up steps, then the same steady pace
        clock.ends[i:] = [t + 1.0 for t in clock.ends[i:]]
    assert clock.steady_steps_per_s() == pytest.approx(2.5)


def test_short_runs_exclude_a_third() -> None:
    clock = _clock(first_step_s=5.0, steady_step_s=0.5, steps=30)
    assert clock.warmup_excluded() == 10
    assert clock.steady_steps_per_s() == pytest.approx(2.0)


def test_no_steady_figure_without_steady_steps() -> None:
    assert _clock(5.0, 0.5, 1).steady_steps_per_s() is None
    assert StepClock(start_unix=0.0).first_step_s() is None
