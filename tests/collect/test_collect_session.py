"""run_session in-process: the run directory it leaves, its callbacks, its clock discipline."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from collectfakes import FakeNvml, fake_psutil

from collect import lateness
from collect.session import SessionOptions, run_session
from collect.sources import Hardware
from collect.sysinfo import package_versions, system_info
from collect.writer import TelemetryWriteError, TelemetryWriter
from runformat import RUN_DIR_ENV, RUN_ID_ENV, is_valid_run_id, read_json


def read_rows(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "telemetry.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def test_sampling_only_run_is_drift_free(tmp_path: Path) -> None:
    result = run_session(SessionOptions(data_dir=tmp_path, interval_s=0.01, duration_s=2.0))
    rows = read_rows(result.run_dir)
    assert result.end_reason == "completed" and result.exit_code == 0
    assert result.samples == len(rows)
    # Absolute deadlines, no accumulated drift: the rows' deadlines (time less lateness) span exactly 2 s.
    deadlines = [float(r["time_unix"]) - float(r["late_ms"]) / 1000.0 for r in rows]
    assert deadlines[-1] - deadlines[0] == pytest.approx(2.0, abs=0.01)
    skipped = sum(int(r["skipped_ticks"]) for r in rows)
    assert abs(len(rows) + skipped - 201) <= 1  # every deadline is a row, or counted as skipped
    # Only a stalled machine skips any, but the tests run two at a time on two cores, and a 2-core VM stalls
    # a 100 Hz thread for whole ticks often enough (bench/soak.py measures keeping up): what this test holds
    # to is the accounting above and the span, with a good part of the deadlines met.
    assert len(rows) >= 201 // 4
    record = read_json(result.run_dir / "run.json")
    assert record["samples"] == len(rows)
    assert record["skipped_ticks"] == skipped
    assert record["end_reason"] == "completed"
    assert record["exit_code"] is None and record["command"] is None
    assert all(r["proc_cpu_pct"] == "" for r in rows)


def test_run_json_at_start_and_callbacks(tmp_path: Path) -> None:
    seen_at_start: list[dict] = []
    rows_seen: list[dict] = []

    def on_start(run_dir: Path) -> None:
        seen_at_start.append(read_json(run_dir / "run.json"))

    options = SessionOptions(
        data_dir=tmp_path, interval_s=0.05, duration_s=0.3, label="unit test", device="gpu"
    )
    result = run_session(options, on_start=on_start, on_sample=rows_seen.append)
    assert len(seen_at_start) == 1
    start = seen_at_start[0]
    assert start["end_reason"] == "running"
    assert start["end_unix"] is None and start["samples"] == 0
    assert start["label"] == "unit test" and start["device"] == "gpu"
    assert is_valid_run_id(start["run_id"]) and start["run_id"].split("-")[1] == "gpu"
    assert result.run_dir.parent == tmp_path.resolve() / "runs"
    final = read_json(result.run_dir / "run.json")
    assert final["start_unix"] == start["start_unix"]
    assert final["actual_duration_s"] == pytest.approx(final["end_unix"] - final["start_unix"], abs=0.01)
    assert final["requested_duration_s"] == 0.3
    assert final["sampler"]["late_ms_p99"] is not None
    rows = read_rows(result.run_dir)
    assert len(rows_seen) == len(rows)
    assert float(rows[-1]["time_unix"]) == rows_seen[-1]["time_unix"]
    first_elapsed = float(rows[0]["elapsed_s"])
    assert 0 < first_elapsed < 5.0  # an interval after the start's work (system facts), however loaded
    assert float(rows[0]["time_unix"]) - final["start_unix"] == pytest.approx(first_elapsed, abs=1e-5)


def test_at_10ms_the_row_after_the_command_ended_shows_the_tree_gone(tmp_path: Path) -> None:
    """The process tree is read every 0.1 s at 10 ms (held in between), but the last row reads it afresh.
    The command holds its 30 MB until a row has shown them (a loaded machine may start sampling late)."""
    seen = tmp_path / "seen"
    holder = (
        "import os, sys, time\ndata = bytearray(30_000_000)\nend = time.time() + 60\n"
        "while not os.path.exists(sys.argv[1]) and time.time() < end: time.sleep(0.005)"
    )

    def on_sample(row: dict[str, float | None]) -> None:
        if (row["proc_rss_bytes"] or 0) > 30_000_000:
            seen.touch()

    for run in range(3):  # the exit falls on a held tick 9 times in 10; three runs leave no luck to the check
        seen.unlink(missing_ok=True)
        command = [sys.executable, "-c", holder, str(seen)]
        options = SessionOptions(
            data_dir=tmp_path / str(run), interval_s=0.01, command=command, echo_output=False
        )
        result = run_session(options, on_sample=on_sample)
        rows = read_rows(result.run_dir)
        assert any(int(row["proc_rss_bytes"] or 0) > 30_000_000 for row in rows)
        assert rows[-1]["proc_rss_bytes"] in ("", "0")


def test_at_10ms_every_row_written_is_the_row_handed_over(tmp_path: Path) -> None:
    """Held cells are formatted once per reading: the file still says what each tick's row said."""
    handed: list[dict[str, float | None]] = []
    command = [sys.executable, "-c", "import time; end = time.time() + 0.5\nwhile time.time() < end: pass"]
    options = SessionOptions(data_dir=tmp_path, interval_s=0.01, command=command, echo_output=False)
    result = run_session(options, on_sample=handed.append)
    rows = read_rows(result.run_dir)
    assert len(rows) == len(handed) > 20
    for row, given in zip(rows, handed, strict=True):
        assert row == {name: "" if value is None else str(value) for name, value in given.items()}
    assert len({row["proc_cpu_pct"] for row in rows}) > 1  # the held cells moved as the sources were read


def test_a_second_run_in_the_same_second_gets_a_suffix(tmp_path: Path) -> None:
    first = run_session(SessionOptions(data_dir=tmp_path, interval_s=0.01, duration_s=0.01))
    second = run_session(SessionOptions(data_dir=tmp_path, interval_s=0.01, duration_s=0.01))
    assert first.run_dir != second.run_dir
    if second.run_dir.name.startswith(first.run_dir.name):
        assert second.run_dir.name == first.run_dir.name + "-2"


def test_command_gets_the_run_dir_and_its_exit_code_is_kept(tmp_path: Path) -> None:
    script = f"import os, sys; print(os.environ[{RUN_DIR_ENV!r}], os.environ[{RUN_ID_ENV!r}], sys.argv[1])"
    script += "; sys.exit(3)"
    options = SessionOptions(
        data_dir=tmp_path,
        interval_s=0.05,
        command=[sys.executable, "-c", script, "{run_dir}/out"],
        echo_output=False,
    )
    result = run_session(options)
    assert result.end_reason == "failed" and result.exit_code == 3
    log = (result.run_dir / "command.log").read_text().split()
    assert log == [str(result.run_dir), result.run_dir.name, f"{result.run_dir}/out"]
    record = read_json(result.run_dir / "run.json")
    assert record["exit_code"] == 3 and record["end_reason"] == "failed"
    assert record["sources"]["process"] == {"available": True}


def test_a_command_that_cannot_start_fails_the_run_cleanly(tmp_path: Path) -> None:
    not_executable = tmp_path / "script.sh"
    not_executable.write_text("echo hi\n")
    result = run_session(SessionOptions(data_dir=tmp_path, command=[str(not_executable)], echo_output=False))
    assert (result.end_reason, result.exit_code, result.samples) == ("failed", 1, 0)
    record = read_json(result.run_dir / "run.json")
    assert "Permission denied" in record["error"]


def test_fake_gpus_flow_into_run_json_and_columns(tmp_path: Path, fake_nvml: FakeNvml) -> None:
    fake_nvml.gpus[1].unsupported.add("nvmlDeviceGetFanSpeed")
    hardware = Hardware(load_nvml=lambda: fake_nvml, environ={})
    result = run_session(
        SessionOptions(data_dir=tmp_path, interval_s=0.02, duration_s=0.1, hardware=hardware)
    )
    record = read_json(result.run_dir / "run.json")
    system = record["system"]
    assert system["gpu_count"] == 2
    assert system["gpus"][1]["name"] == "NVIDIA A100-SXM4-40GB"
    assert system["cuda_version"] == "12.4"
    assert record["sources"]["nvml"]["available"] is True
    assert record["sources"]["nvml"]["notes"] == [
        "gpu1 fan speed: not supported (Not Supported); its column stays empty"
    ]
    rows = read_rows(result.run_dir)
    assert {r["gpu0_power_w"] for r in rows} == {"312.5"}
    assert {(r["gpu0_power_instant_w"], r["gpu0_power_limit_w"]) for r in rows} == {("341.25", "700.0")}
    assert system["gpus"][0]["sm_clock_max_mhz"] == 1980.0
    assert {r["gpu1_fan_pct"] for r in rows} == {""}
    assert fake_nvml.shut_down


def test_bad_options_are_value_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="interval"):
        run_session(SessionOptions(data_dir=tmp_path, interval_s=0.001))
    with pytest.raises(ValueError, match="duration"):
        run_session(SessionOptions(data_dir=tmp_path, duration_s=0))
    with pytest.raises(ValueError, match="empty command"):
        run_session(SessionOptions(data_dir=tmp_path, command=[]))
    assert not (tmp_path / "runs").exists()


def test_writer_header_empty_cells_and_full_disk(tmp_path: Path) -> None:
    writer = TelemetryWriter(tmp_path / "t.csv", ["a", "b", "c"])
    writer.write({"a": 1.5, "b": None, "c": 3})
    assert (tmp_path / "t.csv").read_text() == "a,b,c\n1.5,,3\n"  # flushed as written
    writer.close()
    with pytest.raises(TelemetryWriteError, match="No space left"):
        TelemetryWriter(Path("/dev/full"), ["a"])


def test_system_info_with_fake_psutil() -> None:
    info = system_info(psutil_module=fake_psutil(), gpus=[{"index": 0}], cuda_version="12.4")
    assert info["cpu_cores_logical"] == 8
    assert info["cpu_cores_physical"] == 4
    assert info["mem_total_bytes"] == 64 * 1024**3
    assert info["swap_total_bytes"] == 2 * 1024**3
    assert info["gpu_count"] == 1 and info["cuda_version"] == "12.4"
    assert info["cpu_sockets"] >= 1
    json.dumps(info)


def test_package_versions_never_import_tensorflow() -> None:
    versions = package_versions(("psutil", "surely-not-installed-pkg"))
    assert versions["psutil"]
    assert versions["surely-not-installed-pkg"] is None
    # in a fresh process: this one may have imported TensorFlow for an earlier test
    script = "import sys; from collect.sysinfo import package_versions as v; v(('tensorflow', 'torch'));"
    script += "print(sorted({'tensorflow', 'torch'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_failing_callback_still_leaves_a_final_run_json_and_no_command(tmp_path: Path) -> None:
    def broken(_row: dict) -> None:
        raise RuntimeError("progress line broke")

    options = SessionOptions(
        data_dir=tmp_path, interval_s=0.05, command=[sys.executable, "-c", "import time; time.sleep(30)"]
    )
    with pytest.raises(RuntimeError, match="progress line broke"):
        run_session(options, on_sample=broken)
    (run_dir,) = (tmp_path / "runs").iterdir()
    record = read_json(run_dir / "run.json")
    assert record["end_reason"] == "failed"
    assert record["error"] == "collector error: RuntimeError: progress line broke"
    assert record["exit_code"] == -15  # stopped gracefully (SIGTERM), not left running


def test_sampling_that_costs_over_a_tenth_of_a_core_says_so_once(tmp_path: Path, monkeypatch, capsys) -> None:
    """On the H100 machine NVML's reads cost 3.9 ms a row: at 10 ms that is 40 % of a core. The collector
    measures its own thread's CPU and says so once, after the first seconds (here shortened)."""
    monkeypatch.setattr(lateness, "COST_CHECK_AFTER_S", 0.3)

    def costly(row: dict) -> None:  # the progress callback runs in the sampling thread: 3 ms of CPU a row
        end = time.thread_time() + 0.003
        while time.thread_time() < end:
            pass

    result = run_session(SessionOptions(data_dir=tmp_path, interval_s=0.01, duration_s=1.0), on_sample=costly)
    err = capsys.readouterr().err
    assert err.count("collect: sampling takes") == 1 and "% of a core at this interval" in err
    sampler = read_json(result.run_dir / "run.json")["sampler"]
    assert sampler["cpu_pct_of_core"] >= 10 and sampler["cpu_s"] >= 0.003 * result.samples


def test_cheap_sampling_records_its_cost_and_says_nothing(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(lateness, "COST_CHECK_AFTER_S", 0.1)
    result = run_session(SessionOptions(data_dir=tmp_path, interval_s=0.05, duration_s=0.5))
    assert "sampling takes" not in capsys.readouterr().err
    sampler = read_json(result.run_dir / "run.json")["sampler"]
    assert sampler["cpu_s"] > 0 and 0 < sampler["cpu_pct_of_core"] < 10
