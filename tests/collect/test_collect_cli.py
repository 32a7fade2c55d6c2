"""The real CLI on this machine: deadlines, stubborn commands, Ctrl-C, kill -9, a full disk, bad input."""

from __future__ import annotations

import contextlib
import csv
import io
import itertools
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runformat import read_json

PYTHON = sys.executable
REPO = Path(__file__).resolve().parents[2]

GRACEFUL = """
import signal, sys, time
def stop(signum, frame):
    print("got", signal.Signals(signum).name, flush=True)
    sys.exit(0)
signal.signal(signal.SIGINT, stop)
print("ready", flush=True)
time.sleep(60)
"""

STUBBORN = """
import signal, time
for name in {ignored}:
    signal.signal(getattr(signal, name), signal.SIG_IGN)
print("ready", flush=True)
time.sleep(60)
"""


def collector(args: list[str], data_dir: Path, **popen: object) -> subprocess.Popen[str]:
    """The collector in its own session, so signals sent to it reach nothing else."""
    return subprocess.Popen(
        [PYTHON, "-m", "collect", *args[:1], "--data-dir", str(data_dir), *args[1:]],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **popen,
    )


def finish(process: subprocess.Popen[str], timeout: float = 30) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


def only_run(data_dir: Path) -> Path:
    runs = list((data_dir / "runs").iterdir())
    assert len(runs) == 1
    return runs[0]


def wait_for(predicate, timeout: float = 15.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def complete_rows(run_dir: Path) -> list[dict[str, str]]:
    """Rows of telemetry.csv, a truncated last line left out (as readers must do)."""
    text = (run_dir / "telemetry.csv").read_text()
    if not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    return list(csv.DictReader(io.StringIO(text)))


def log_says(data_dir: Path, text: str) -> bool:
    runs = data_dir / "runs"
    if not runs.exists():
        return False
    return any(
        text in (run / "command.log").read_text() for run in runs.iterdir() if (run / "command.log").exists()
    )


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        (["--duration", "0"], "duration must be greater than zero"),
        (["--duration", "-5m"], "bad duration '-5m'"),
        (["--duration", "75x"], "bad duration '75x'"),
        (["--duration", ""], "empty duration"),
        (["--interval", "5ms"], "interval '5ms' is below the minimum of 10ms"),
        (["--interval", "0"], "interval must be greater than zero"),
        (["--interval", "-1s"], "bad interval '-1s'"),  # argparse had read it as an option
    ],
)
def test_bad_values_exit_2_with_one_line_before_anything_starts(
    tmp_path: Path, bad: list[str], said: str
) -> None:
    code, _out, err = finish(collector(["sample", *bad], tmp_path / "data"))
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and said in err
    assert not (tmp_path / "data").exists()


def test_unknown_command_and_missing_command_are_usage_errors(tmp_path: Path) -> None:
    for args in (["run", "--", "surely-no-such-command-xyz"], ["run", "--duration", "5s"]):
        code, _, err = finish(collector(args, tmp_path / "data"))
        assert code == 2 and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "data").exists()


def test_command_that_exits_early_keeps_its_exit_code(tmp_path: Path) -> None:
    started = time.monotonic()
    code, out, _err = finish(
        collector(
            ["run", "--duration", "30s", "--interval", "50ms", "--", PYTHON, "-c", "print('bye'); exit(3)"],
            tmp_path,
        )
    )
    assert code == 3
    assert time.monotonic() - started < 10
    assert "bye" in out  # echoed to the console
    run_dir = only_run(tmp_path)
    assert (run_dir / "command.log").read_text() == "bye\n"
    record = read_json(run_dir / "run.json")
    assert (record["end_reason"], record["exit_code"]) == ("failed", 3)
    assert record["samples"] == len(complete_rows(run_dir)) >= 1


def test_the_command_numbers_gpus_as_nvml_does_and_iowait_is_recorded(tmp_path: Path) -> None:
    """CUDA_DEVICE_ORDER=PCI_BUS_ID reaches the command (GPU indices then match NVML's); the telemetry
    has sysstat's iowait and steal columns."""
    show = "import os; print(os.environ.get('CUDA_DEVICE_ORDER'))"
    args = ["run", "--duration", "30s", "--interval", "50ms", "--", PYTHON, "-c", show]
    env = {**os.environ, "CUDA_DEVICE_ORDER": "FASTEST_FIRST"}  # the default order would differ from NVML's
    code, _out, _err = finish(collector(args, tmp_path, env=env))
    assert code == 0
    run_dir = only_run(tmp_path)
    assert (run_dir / "command.log").read_text() == "PCI_BUS_ID\n"
    header = (run_dir / "telemetry.csv").read_text().splitlines()[0].split(",")
    assert {"cpu_iowait_pct", "cpu_steal_pct"} <= set(header)


def test_deadline_stops_the_command_with_sigint_and_exits_124(tmp_path: Path) -> None:
    code, _out, err = finish(
        collector(["run", "--duration", "1s", "--interval", "100ms", "--", PYTHON, "-c", GRACEFUL], tmp_path)
    )
    assert code == 124, err
    run_dir = only_run(tmp_path)
    assert (run_dir / "command.log").read_text() == "ready\ngot SIGINT\n"
    record = read_json(run_dir / "run.json")
    assert (record["end_reason"], record["exit_code"]) == ("deadline", 0)
    rows = complete_rows(run_dir)
    last_elapsed = float(rows[-1]["elapsed_s"])
    assert 1.0 <= last_elapsed < 3.0  # the stop came at the deadline, however slow the command's exit
    assert 10 <= len(rows) <= round(last_elapsed / 0.1) + 1  # a stalled VM skips ticks, never adds any
    assert any(float(r["proc_rss_bytes"] or 0) > 1e6 for r in rows)


@pytest.mark.parametrize(("ignored", "expected_exit"), [(["SIGINT"], -15), (["SIGINT", "SIGTERM"], -9)])
def test_a_command_ignoring_signals_is_escalated(
    tmp_path: Path, ignored: list[str], expected_exit: int
) -> None:
    script = STUBBORN.format(ignored=ignored)
    args = [
        "run",
        "--duration",
        "1s",
        "--interval",
        "100ms",
        "--sigint-grace",
        "0.5s",
        "--sigterm-grace",
        "0.5s",
    ]
    started = time.monotonic()
    code, _, err = finish(collector([*args, "--", PYTHON, "-c", script], tmp_path))
    assert code == 124, err
    assert time.monotonic() - started < 8
    record = read_json(only_run(tmp_path) / "run.json")
    assert (record["end_reason"], record["exit_code"]) == ("deadline", expected_exit)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_to_the_collector_stops_the_command_and_exits_130(
    tmp_path: Path, signum: int
) -> None:
    process = collector(["run", "--interval", "50ms", "--", PYTHON, "-c", GRACEFUL], tmp_path)
    wait_for(lambda: log_says(tmp_path, "ready"))
    time.sleep(0.3)
    signalled_at = time.time()
    process.send_signal(signum)
    code, _, err = finish(process)
    assert code == 130, err
    run_dir = only_run(tmp_path)
    assert (run_dir / "command.log").read_text() == "ready\ngot SIGINT\n"
    record = read_json(run_dir / "run.json")
    assert (record["end_reason"], record["exit_code"]) == ("interrupted", 0)
    assert record["requested_duration_s"] is None
    assert float(complete_rows(run_dir)[-1]["time_unix"]) > signalled_at  # sampled until the command was gone


def test_kill_9_of_the_collector_loses_no_written_row(tmp_path: Path) -> None:
    pid_file = tmp_path / "command.pid"
    script = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    process = collector(["run", "--interval", "20ms", "--", PYTHON, "-c", script], tmp_path / "data")
    try:
        wait_for(
            lambda: (
                (tmp_path / "data" / "runs").exists()
                and len(list((tmp_path / "data" / "runs").iterdir())) == 1
            )
        )
        run_dir = only_run(tmp_path / "data")
        # the run directory comes before its telemetry.csv: on a loaded machine the test can look between
        wait_for(lambda: (run_dir / "telemetry.csv").exists() and len(complete_rows(run_dir)) >= 40)
        seen_before_kill = len(complete_rows(run_dir))
        wait_for(pid_file.exists)
        command_pid = int(pid_file.read_text())
        process.kill()
        process.wait(10)
        # The command gets SIGTERM when its collector dies: nothing goes on running unrecorded.
        wait_for(lambda: not _alive(command_pid))
    finally:
        with contextlib.suppress(ProcessLookupError, ValueError, FileNotFoundError):
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)
    rows = complete_rows(run_dir)
    assert len(rows) >= seen_before_kill
    for earlier, later in itertools.pairwise(rows):
        # No hole: each row's deadline (its time less its lateness) is one interval after the previous
        # row's, or more by the deadlines it reports skipped (a row may start up to an interval late). A
        # missing row would be a whole interval more; a loaded VM may stall a tick's clock reads by less.
        gap = _deadline_s(later) - _deadline_s(earlier)
        expected = 0.02 * (1 + int(later["skipped_ticks"]))
        assert expected - 0.01 < gap < expected + 0.02
    assert read_json(run_dir / "run.json")["end_reason"] == "running"


def _deadline_s(row: dict[str, str]) -> float:
    return float(row["elapsed_s"]) - float(row["late_ms"]) / 1000.0


def _alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie waiting for a reaper that may never come in a container."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or while it was read
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (30_000, 30_000))


def test_a_full_disk_stops_the_run_cleanly_with_exit_1(tmp_path: Path) -> None:
    args = ["run", "--interval", "10ms", "--duration", "30s", "--", PYTHON, "-c", GRACEFUL]
    code, _, err = finish(collector(args, tmp_path, preexec_fn=_limit_file_size))
    assert code == 1
    problem_lines = [line for line in err.splitlines() if "File too large" in line]
    assert len(problem_lines) == 1 and "telemetry.csv" in problem_lines[0]
    assert "Traceback" not in err
    run_dir = only_run(tmp_path)
    record = read_json(run_dir / "run.json")
    assert record["end_reason"] == "failed" and "File too large" in record["error"]
    assert record["exit_code"] == 0  # the command was stopped gracefully
    assert (run_dir / "command.log").read_text() == "ready\ngot SIGINT\n"
    rows = complete_rows(run_dir)
    assert len(rows) > 50
    assert record["samples"] == len(rows)  # every row counted was written whole
    assert all(row["time_unix"] for row in rows)
