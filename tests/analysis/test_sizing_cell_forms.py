"""Numbers written the way other tools write them (a unit after the number, thousands grouped, a framework's
printout of a tensor) are read, said; cells that hold no number are unknown, said. Copies of the H100 run
and its 16-CPU baseline (data/examples) go through the report and the dashboard."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from test_sizing_imperfect_runs import CPU_RUN, GPU_RUN, decision_of, report_of, rewrite, telemetry

from dashboard import runs as dashboard_runs
from runformat.cells import cell_number, not_available


@pytest.mark.parametrize(
    ("cell", "column", "value"),
    [
        ("45 %", "gpu0_util_pct", 45.0),
        ("45%", "cpu_util_pct", 45.0),
        ("250.5 W", "gpu0_power_w", 250.5),
        ("1980 MHz", "gpu0_sm_clock_mhz", 1980.0),
        ("36 C", "gpu0_temp_c", 36.0),
        ("36 °C", "cpu_temp_c", 36.0),
        ("1,024 MiB", "gpu0_mem_used_bytes", 1024 * 2**20),
        ("1,234.5", "examples_per_s", 1234.5),
        ("-1,000", "step", -1000.0),
        ("tensor(0.5312, device='cuda:0', grad_fn=<NllLossBackward0>)", "loss", 0.5312),
        ("tf.Tensor(1.5e-3, shape=(), dtype=float32)", "loss", 0.0015),
        ("np.float32(0.25)", "loss_total", 0.25),
        (" 7 ", "step", 7.0),
    ],
)
def test_a_number_in_another_tools_form_is_read(cell: str, column: str, value: float) -> None:
    assert cell_number(cell, column) == pytest.approx(value)


@pytest.mark.parametrize(
    ("cell", "column"),
    [
        ("45 W", "gpu0_util_pct"),  # another column's unit
        ("12 ms", "step_time_s"),  # another unit is not converted
        ("250 mW", "gpu0_power_w"),
        ("1.234,5", "examples_per_s"),  # a decimal-comma locale's grouping: not this module's to guess
        ("12,34", "step"),  # not grouped in thousands
        ("Loss<0.5>", "loss"),
        ("fast", "examples_per_s"),
        ("45 %", "step"),  # a column without a unit
        ("12 s", "examples_per_s"),  # a rate, not seconds
    ],
)
def test_a_cell_that_holds_no_number_of_its_column_is_none(cell: str, column: str) -> None:
    assert cell_number(cell, column) is None


def test_markers_of_no_reading_are_not_problems() -> None:
    assert all(not_available(c) for c in ("", " N/A ", "[N/A]", "[Not Supported]", "-", "null"))
    assert not not_available("0")


def with_units(frame: pd.DataFrame) -> None:
    """Each GPU and CPU percentage written with `%`, the board's power with `W` (pasted from a monitor)."""
    for column in [c for c in frame.columns if c.endswith("_pct")]:
        frame[column] = frame[column].map(lambda v: "" if math.isnan(v) else f"{v:g} %")
    frame["gpu0_power_w"] = frame["gpu0_power_w"].map(lambda v: f"{v:.2f} W")


def step_log(change_frame) -> Callable[[Path], None]:
    return rewrite("training.csv", change_frame)


def grouped_and_printed(frame: pd.DataFrame) -> None:
    """Steps grouped in thousands (a spreadsheet's number format), losses as torch prints a tensor."""
    frame["step"] = frame["step"].map(lambda v: f"{v:,.0f}")
    for column in [c for c in frame.columns if c.startswith("loss")]:
        frame[column] = frame[column].map(lambda v: f"tensor({v}, device='cuda:0', grad_fn=<AddBackward0>)")


def test_units_grouping_and_tensor_printouts_read_as_the_untouched_run(tmp_path: Path) -> None:
    """Before: the `%` cells read as unknown, silently ("MFU why not known: GPU activity not recorded"),
    and steps past 999 were lost ("training.csv holds steps 1–999", the rate that part's)."""
    untouched, _ = decision_of(tmp_path / "a")
    decision, warnings = decision_of(
        tmp_path / "b", gpu_change=lambda d: (telemetry(with_units)(d), step_log(grouped_and_printed)(d))
    )
    assert [o["line"] for o in decision["options"]] == [o["line"] for o in untouched["options"]]
    assert "× faster" in decision["options"][0]["line"]
    said = [w for w in warnings if "read as the numbers they write another way" in w]
    assert len(said) == 2
    assert " %'" in said[0] and "telemetry.csv" in said[0]
    assert "step '1,000'" in said[1] and 'loss_total "tensor(' in said[1]


def test_cells_that_hold_no_number_are_said_not_silently_dropped(tmp_path: Path) -> None:
    def tagged(frame: pd.DataFrame) -> None:
        frame["loss_total"] = frame["loss_total"].map(lambda v: f"Loss<{v}>")

    _, warnings = decision_of(tmp_path, gpu_change=step_log(tagged))
    lost = [w for w in warnings if "that hold no number read as unknown" in w]
    assert len(lost) == 1 and f"{GPU_RUN}: training.csv: " in lost[0] and "loss_total 'Loss<" in lost[0]


def test_the_dashboard_reads_the_cells_as_the_report_does(tmp_path: Path) -> None:
    decision_of(tmp_path, gpu_change=telemetry(with_units))
    run_dir = tmp_path / "runs" / GPU_RUN
    frame = dashboard_runs.read_telemetry(dashboard_runs.open_run_dir(run_dir))
    plain = pd.read_csv(Path(__file__).resolve().parents[2] / "data" / "examples" / GPU_RUN / "telemetry.csv")
    assert frame["gpu0_power_w"].to_numpy() == pytest.approx(plain["gpu0_power_w"].round(2).to_numpy())
    assert frame["gpu0_util_pct"].to_numpy() == pytest.approx(plain["gpu0_util_pct"].to_numpy(), nan_ok=True)
    assert any("read as the numbers they write another way" in w for w in frame.attrs["warnings"])


def test_a_temperature_in_kelvin_is_unknown_not_hot(tmp_path: Path) -> None:
    """Before: 313 K read as 313 °C, the H100 "above the threshold" for its whole run, silently."""

    def kelvin(frame: pd.DataFrame) -> None:
        frame["gpu0_temp_c"] = frame["gpu0_temp_c"] + 273.15

    decision_of(tmp_path, gpu_change=telemetry(kelvin))
    report = report_of(tmp_path)
    assert [row["run_id"] for row in report["sections"]["thermal"]] == [CPU_RUN]
    said = re.compile(r"gpu0_temp_c: \d+ above 150 °C: kelvin or millidegrees\?")
    assert any(said.search(w) for w in report["warnings"])


def test_a_header_repeated_inside_a_log_is_skipped_and_said_once(tmp_path: Path) -> None:
    """A log appended to with its header (a resumed writer): before, every column named its header line's
    cell as one that holds no number, and the row was left out as one without a time."""

    def appended(run_dir: Path) -> None:
        for name in ("telemetry.csv", "training.csv"):
            lines = (run_dir / name).read_text().splitlines(keepends=True)
            half = len(lines) // 2
            (run_dir / name).write_text("".join([*lines[:half], lines[0], *lines[half:]]))

    untouched, _ = decision_of(tmp_path / "a")
    decision, warnings = decision_of(tmp_path / "b", gpu_change=appended)
    assert [o["line"] for o in decision["options"]] == [o["line"] for o in untouched["options"]]
    mine = [w for w in warnings if w.startswith(f"{GPU_RUN}: t")]
    assert f"{GPU_RUN}: telemetry.csv: 1 repeated header line(s) skipped (a log appended to)" in mine
    assert f"{GPU_RUN}: training.csv: 1 repeated header line(s) skipped (a log appended to)" in mine
    assert not any("hold no number" in w or "without a time" in w for w in mine)
    frame = dashboard_runs.read_training(dashboard_runs.open_run_dir(tmp_path / "b" / "runs" / GPU_RUN))
    assert frame["step"].notna().all() and frame.index.is_unique


def test_a_run_built_in_memory_with_text_cells_reads_them_as_load_does() -> None:
    """validated_run (build_report applies it to every run) reads text-bearing cells by the same rule as
    the readers of files: before, it coerced them, `45 %` lost and nothing said."""
    from sizing.analysis.load import load_run_dir
    from sizing.analysis.validate import validated_run

    run = load_run_dir(Path(__file__).resolve().parents[2] / "data" / "examples" / GPU_RUN)
    telemetry = run.telemetry.assign(gpu0_util_pct=run.telemetry["gpu0_util_pct"].map(lambda v: f"{v:g} %"))
    checked = validated_run(replace(run, telemetry=telemetry, warnings=()))
    assert checked.telemetry["gpu0_util_pct"].tolist() == pytest.approx(
        run.telemetry["gpu0_util_pct"].tolist()
    )
    assert any("telemetry.csv: " in w and "gpu0_util_pct '" in w for w in checked.warnings)
