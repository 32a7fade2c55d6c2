"""The live progress line of a timed run: following training.csv, rates, rendering, peaks."""

from __future__ import annotations

import io
from pathlib import Path

from collect.progress import CsvTail, ProgressReporter, TrainingState, render_line

HEADER = "time_unix,elapsed_s,step,loss_total,learning_rate,step_time_s,examples_per_s\n"


def test_csv_tail_returns_each_complete_row_once(tmp_path: Path) -> None:
    path = tmp_path / "training.csv"
    tail = CsvTail(path)
    assert tail.new_rows() == []
    path.write_text(HEADER + "100.0,1.0,1,2.5,0.01,0.4,5.0\n100.5,1.5,2,2.4")
    rows = tail.new_rows()
    assert [row["step"] for row in rows] == ["1"]
    with path.open("a") as handle:
        handle.write(",0.01,0.4,5.0\n")
    assert [row["step"] for row in tail.new_rows()] == ["2"]
    assert tail.new_rows() == []


def test_csv_tail_skips_rows_with_the_wrong_width(tmp_path: Path) -> None:
    path = tmp_path / "training.csv"
    path.write_text(HEADER + "1,2,3\n100.0,1.0,7,2.5,0.01,0.4,5.0\n")
    assert [row["step"] for row in CsvTail(path).new_rows()] == ["7"]


def test_training_state_rate_over_recent_window() -> None:
    state = TrainingState()
    for i in range(0, 101):
        state.add_row({"time_unix": str(1000 + i * 0.5), "step": str(i), "loss_total": str(3 - i / 100)})
    assert state.step == 100
    assert state.steps_per_s == 2.0
    assert state.loss == 2.0
    assert state.phase == "train"
    assert state.train_elapsed_s is None


def test_render_line_after_training() -> None:
    line = render_line(700.0, 600.0, TrainingState(step=9, phase="evaluate"), {"cpu_util_pct": 50.0})
    assert line.startswith("11m40s  evaluate (training budget done)  step 9")


def test_training_state_phase_follows_phases_csv() -> None:
    state = TrainingState()
    state.phases_done([])
    assert state.phase == "starting"
    state.phases_done(["train"])
    assert state.phase == "export"
    state.phases_done(["train", "export", "evaluate"])
    assert state.phase == "detect"
    state.phases_done(["train", "export", "evaluate", "detect"])
    assert state.phase == "infer"


def test_render_line_shows_budget_temperatures_and_gpu_power() -> None:
    state = TrainingState(step=420, loss=1.2345, steps_per_s=2.31, train_elapsed_s=150.0, phase="train")
    telemetry = {"cpu_util_pct": 97.0, "cpu_temp_c": 71.0, "gpu0_temp_c": 64.0, "gpu0_power_w": 231.4}
    line = render_line(192.0, 600.0, state, telemetry)
    assert line.startswith("3m12s  train 2m30s / 10m")
    for part in ("step 420", "loss 1.234", "2.31 steps/s", "CPU 97% 71°C", "GPU0 64°C 231 W"):
        assert part in line


def test_render_line_without_sensors() -> None:
    line = render_line(5.0, 60.0, TrainingState(), {"cpu_util_pct": 12.0, "cpu_temp_c": None})
    assert "starting" in line
    assert line.endswith("CPU 12%")


def test_reporter_prints_plain_lines_when_not_a_terminal_and_tracks_peaks(tmp_path: Path) -> None:
    (tmp_path / "training.csv").write_text(HEADER + "100.0,1.0,1,2.5,0.01,0.4,5.0\n")
    now = [0.0]
    out = io.StringIO()
    reporter = ProgressReporter(60.0, out, clock=lambda: now[0], every_s=10.0)
    reporter.start(tmp_path)
    for second in range(25):
        now[0] = float(second)
        reporter.on_sample({"cpu_util_pct": 50.0, "gpu0_temp_c": 40.0 + second, "gpu0_power_w": 100.0})
    reporter.finish()
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert "step 1" in lines[-1]
    assert reporter.peaks == {"gpu0_temp_c": 64.0, "gpu0_power_w": 100.0}


def test_timed_passes_the_framework_to_the_training_only_when_asked() -> None:
    from collect.timed import build_parser, training_command

    default = training_command(build_parser().parse_args(["10m"]))
    assert "--framework" not in default
    torch = training_command(build_parser().parse_args(["10m", "--framework", "torch"]))
    assert torch[torch.index("--framework") + 1] == "torch"
