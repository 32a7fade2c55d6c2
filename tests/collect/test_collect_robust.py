"""A run survives its own plumbing: nohup, grandchildren, a failing collector, a console that went away,
unusable paths. Real processes and real signals throughout."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collect.progress import ProgressReporter
from collect.session import SessionOptions, run_session
from runformat import read_json

PYTHON = sys.executable
REPO = Path(__file__).resolve().parents[2]

GRACEFUL = """
import signal, sys, time
def stop(signum, frame):
    print("got", signal.Signals(signum).name, flush=True)
    sys.exit(0)
signal.signal(signal.SIGINT, stop)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
time.sleep(60)
"""

# A command whose grandchild would outlive it: bash does not pass signals on to a background job.
TREE = "sleep 300 & echo $! > {run_dir}/grandchild.pid; wait"


def _as_from_a_terminal() -> None:
    """SIGINT and SIGHUP at their defaults, as a shell prompt starts a command, whatever started pytest
    (a suite launched with `nohup ... &` hands its children both ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def collector(args: list[str], data_dir: Path, **popen: object) -> subprocess.Popen[str]:
    popen.setdefault("preexec_fn", _as_from_a_terminal)
    return subprocess.Popen(
        [PYTHON, "-m", "collect", *args[:1], "--data-dir", str(data_dir), *args[1:]],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **popen,
    )


def wait_for(predicate, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def running(pid: int) -> bool:
    """Running, as opposed to gone or a zombie waiting for a reaper that may never come in a container."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or while it was read
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def the_run(data_dir: Path) -> Path:
    wait_for(lambda: (data_dir / "runs").is_dir() and len(list((data_dir / "runs").iterdir())) == 1)
    return next((data_dir / "runs").iterdir())


def says_ready(run_dir: Path) -> bool:
    log = run_dir / "command.log"
    return log.exists() and "ready" in log.read_text()


def grandchild_of(run_dir: Path) -> int:
    pid_file = run_dir / "grandchild.pid"
    wait_for(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
    return int(pid_file.read_text())


def _ignore_sighup() -> None:
    _as_from_a_terminal()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # what nohup does before exec


# ---- 3. detached runs -----------------------------------------------------------------------------


def test_sighup_ignored_at_start_stays_ignored(tmp_path: Path) -> None:
    args = ["run", "--duration", "2s", "--interval", "100ms", "--", PYTHON, "-c", GRACEFUL]
    process = collector(args, tmp_path, preexec_fn=_ignore_sighup)
    run_dir = the_run(tmp_path)
    wait_for(lambda: says_ready(run_dir))
    process.send_signal(signal.SIGHUP)  # the ssh session that started `nohup ...` is gone
    _out, err = process.communicate(timeout=30)
    assert process.returncode == 124, err  # the deadline, not "interrupted"
    assert read_json(run_dir / "run.json")["end_reason"] == "deadline"


def test_sighup_without_nohup_interrupts(tmp_path: Path) -> None:
    process = collector(["run", "--interval", "100ms", "--", PYTHON, "-c", GRACEFUL], tmp_path)
    run_dir = the_run(tmp_path)
    wait_for(lambda: says_ready(run_dir))
    process.send_signal(signal.SIGHUP)
    process.communicate(timeout=30)
    assert process.returncode == 130
    assert read_json(run_dir / "run.json")["end_reason"] == "interrupted"


def _signal_mask(text: str, field: str) -> set[int]:
    mask = int(next(line for line in text.splitlines() if line.startswith(f"{field}:")).split()[1], 16)
    return {bit + 1 for bit in range(64) if mask >> bit & 1}


def test_a_background_launch_under_nohup_stops_at_its_deadline(tmp_path: Path) -> None:
    """The README's `nohup ... &`, from a non-interactive shell: every job it starts with `&` inherits
    SIGINT ignored. The command still gets SIGINT's default (and keeps nohup's SIGHUP ignored), so the
    first stop signal works and the run ends at its deadline, not 20 s of grace later."""
    script = tmp_path / "launch.sh"
    script.write_text(
        "set -euo pipefail\n"
        f"cd {REPO}\n"
        f"nohup {PYTHON} -m collect run --data-dir {tmp_path} --duration 4s -- "
        f"sh -c 'grep ^SigIgn: /proc/$$/status; exec sleep 30' > {tmp_path}/run.log 2>&1 &\n"
        "status=0\n"
        'wait "$!" || status=$?\n'
        'echo "exit $status"\n'
    )
    done = subprocess.run(
        ["bash", str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip() == "exit 124", done.stdout + done.stderr
    log = (tmp_path / "run.log").read_text()
    run_dir = next((tmp_path / "runs").iterdir())
    record = read_json(run_dir / "run.json")
    assert record["end_reason"] == "deadline" and record["exit_code"] == -signal.SIGINT
    assert record["actual_duration_s"] < 4 + 3, record["actual_duration_s"]
    assert record["sampler"]["stop_signals"] == ["SIGINT"]
    assert "collect: SIGINT to the command (deadline)" in log
    assert f"collect: deadline, {record['samples']} samples, exit code 124: {run_dir}" in log
    ignored_by_command = _signal_mask((run_dir / "command.log").read_text(), "SigIgn")
    assert signal.SIGHUP in ignored_by_command and signal.SIGINT not in ignored_by_command


def test_a_command_that_ignores_sigint_gets_sigterm_at_once(tmp_path: Path) -> None:
    args = ["run", "--duration", "2s", "--interval", "100ms", "--", "sh", "-c", "trap '' INT; sleep 30"]
    process = collector(args, tmp_path)
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 124, err
    assert "collect: SIGTERM to the command (deadline; it ignores SIGINT)" in err
    record = read_json(the_run(tmp_path) / "run.json")
    assert (record["end_reason"], record["exit_code"]) == ("deadline", -signal.SIGTERM)
    assert record["actual_duration_s"] < 2 + 3  # not after the 20 s SIGINT grace period
    assert record["sampler"]["stop_signals"] == ["SIGTERM"]
    assert "the command ignored SIGINT: not sent" in record["notes"]


def test_ignored_signals_are_read_from_proc() -> None:
    from collect.stopping import ignored_signals

    previous = signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    try:
        assert signal.SIGUSR2 in ignored_signals(os.getpid())
    finally:
        signal.signal(signal.SIGUSR2, previous)
    assert signal.SIGUSR2 not in ignored_signals(os.getpid())
    assert ignored_signals(2**22 + 12345) == set()  # no such process: nothing known to be ignored


# ---- 5. the whole command tree ---------------------------------------------------------------------


@pytest.mark.parametrize("stop", ["ctrl-c", "deadline", "kill -9 of the collector"])
def test_every_stop_reaches_the_grandchildren(tmp_path: Path, stop: str) -> None:
    duration = ["--duration", "2s"] if stop == "deadline" else []
    args = ["run", "--interval", "50ms", *duration, "--sigint-grace", "2s", "--", "bash", "-c", TREE]
    process = collector(args, tmp_path)
    run_dir = the_run(tmp_path)
    grandchild = grandchild_of(run_dir)
    try:
        assert running(grandchild)
        if stop == "ctrl-c":
            process.send_signal(signal.SIGINT)
        elif stop == "kill -9 of the collector":
            time.sleep(0.3)
            process.kill()
        process.communicate(timeout=30)
        wait_for(lambda: not running(grandchild), timeout=15)
    finally:
        if running(grandchild):
            os.kill(grandchild, signal.SIGKILL)
    expected = {"ctrl-c": 130, "deadline": 124, "kill -9 of the collector": -9}[stop]
    assert process.returncode == expected


# ---- 4. a collector failure stops the command gracefully -------------------------------------------


def _failing_after(samples: int):  # type: ignore[no-untyped-def]
    seen = []

    def on_sample(row: dict) -> None:
        seen.append(row)
        if len(seen) == samples:
            raise RuntimeError("a bug in the sampling loop")

    return on_sample


def test_a_collector_failure_sends_sigterm_to_the_whole_tree(tmp_path: Path) -> None:
    script = GRACEFUL.replace(
        'print("ready", flush=True)',
        "import os, subprocess\n"
        "child = subprocess.Popen(['sleep', '300'])\n"
        "open(os.path.join(os.environ['WORKBENCH_RUN_DIR'], 'grandchild.pid'), 'w').write(str(child.pid))\n"
        'print("ready", flush=True)',
    )
    options = SessionOptions(
        data_dir=tmp_path, interval_s=0.05, command=[PYTHON, "-c", script], echo_output=False
    )
    with pytest.raises(RuntimeError, match="a bug in the sampling loop"):
        run_session(options, on_sample=_failing_after(40))  # 2 s: the command is up by then
    run_dir = next((tmp_path / "runs").iterdir())
    grandchild = int((run_dir / "grandchild.pid").read_text())
    wait_for(lambda: not running(grandchild), timeout=5)
    assert (run_dir / "command.log").read_text() == "ready\ngot SIGTERM\n"  # SIGTERM, not SIGKILL
    record = read_json(run_dir / "run.json")
    assert (record["end_reason"], record["exit_code"]) == ("failed", 0)
    assert record["error"] == "collector error: RuntimeError: a bug in the sampling loop"


def test_a_command_deaf_to_sigterm_gets_sigkill_after_the_grace_period(tmp_path: Path) -> None:
    script = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)"
    options = SessionOptions(
        data_dir=tmp_path,
        interval_s=0.05,
        command=[PYTHON, "-c", script],
        echo_output=False,
        stop_grace_s=(1.0, 1.5),
    )
    started = time.monotonic()
    with pytest.raises(RuntimeError):
        run_session(options, on_sample=_failing_after(20))
    took = time.monotonic() - started
    record = read_json(next((tmp_path / "runs").iterdir()) / "run.json")
    assert record["exit_code"] == -9
    assert took >= 1.0 + 2.5  # 1 s of samples, then both grace periods before SIGKILL


def test_a_progress_line_that_cannot_be_written_is_dropped_not_the_run(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the terminal (or the pipe reader) is gone
    console = os.fdopen(write_end, "w")
    reporter = ProgressReporter(60.0, console, every_s=0.0)
    options = SessionOptions(
        data_dir=tmp_path,
        interval_s=0.05,
        duration_s=1.0,
        command=[PYTHON, "-c", "import time; time.sleep(0.5)"],
        echo_output=False,
    )
    result = run_session(options, on_start=reporter.start, on_sample=reporter.on_sample)
    reporter.finish()
    assert (result.end_reason, result.exit_code) == ("completed", 0)
    assert reporter.broken
    assert reporter.peaks == {} or isinstance(reporter.peaks, dict)
    assert result.samples >= 8


def test_an_os_error_from_the_sample_callback_drops_the_callback_only(tmp_path: Path) -> None:
    calls = []

    def hung_up(_row: dict) -> None:
        calls.append(1)
        raise OSError(errno.EIO, "Input/output error")  # what a write to a hung-up terminal raises

    options = SessionOptions(data_dir=tmp_path, interval_s=0.05, duration_s=0.5)
    result = run_session(options, on_sample=hung_up)
    assert (result.end_reason, result.exit_code) == ("completed", 0)
    assert len(calls) == 1 and result.samples >= 4  # sampling went on (10 nominal; a stalled VM skips ticks)
    record = read_json(result.run_dir / "run.json")
    assert record["sampler"]["progress_error"] == "progress line dropped: Input/output error"


# ---- 6. usage errors are one line -------------------------------------------------------------------


@pytest.fixture
def not_a_dir(tmp_path: Path) -> Path:
    path = tmp_path / "a-file"
    path.write_text("x")
    return path


@pytest.mark.parametrize("subcommand", ["run", "sample", "timed"])
@pytest.mark.parametrize("where", ["unwritable", "missing parent", "a file"])
def test_unusable_data_dir_is_one_line_and_exit_2(
    tmp_path: Path, not_a_dir: Path, subcommand: str, where: str
) -> None:
    data_dir = {
        "unwritable": Path("/proc/workbench-data"),  # unwritable even for root
        "missing parent": tmp_path / "no" / "such" / "data",
        "a file": not_a_dir,
    }[where]
    tail = {"run": ["--", "true"], "sample": ["--duration", "1s"], "timed": []}[subcommand]
    head = ["timed", "10s"] if subcommand == "timed" else [subcommand]
    result = subprocess.run(
        [PYTHON, "-m", "collect", *head, "--data-dir", str(data_dir), *tail],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "--data-dir" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("bad", [["--dataset", "EMPTY"], ["--dataset", "MISSING"], ["--preset", "huge"]])
@pytest.mark.parametrize("entry", ["collect timed", "collect_cpu.sh", "collect_gpu.sh"])
def test_unusable_dataset_or_preset_is_one_line_and_exit_2(
    tmp_path: Path, bad: list[str], entry: str
) -> None:
    (tmp_path / "empty").mkdir()
    value = {"EMPTY": str(tmp_path / "empty"), "MISSING": str(tmp_path / "missing")}.get(bad[1], bad[1])
    options = [bad[0], value, "--data-dir", str(tmp_path)]
    if entry == "collect timed":
        argv = [PYTHON, "-m", "collect", "timed", "10s", *options]
    else:
        argv = [str(REPO / "scripts" / entry), "10s", *options]
    result = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and bad[0] in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("script", ["collect_cpu.sh", "collect_gpu.sh"])
def test_scripts_refuse_an_unwritable_data_dir_in_one_line(script: str) -> None:
    result = subprocess.run(
        [str(REPO / "scripts" / script), "10s", "--data-dir", "/proc/workbench-data"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "--data-dir" in result.stderr


def test_a_collector_whose_console_is_gone_records_the_whole_run(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody reads stdout or stderr: every line the collector prints fails
    args = ["run", "--duration", "1s", "--interval", "50ms", "--", "sleep", "5"]
    process = subprocess.Popen(
        [PYTHON, "-m", "collect", args[0], "--data-dir", str(tmp_path), *args[1:]],
        cwd=REPO,
        stdout=write_end,
        stderr=write_end,
        start_new_session=True,
    )
    os.close(write_end)
    assert process.wait(timeout=30) == 124
    record = read_json(the_run(tmp_path) / "run.json")
    # Every deadline of the second is a row or counted as skipped (a loaded 2-core VM stalls some ticks).
    recorded = record["samples"] + record["skipped_ticks"]
    assert (record["end_reason"], recorded >= 20, record["samples"] >= 5) == ("deadline", True, True)
