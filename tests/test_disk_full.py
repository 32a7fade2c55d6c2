"""A full disk (issue 38): the estimate before a run, the collector's own writes failing (a fake at the
boundary), and small real filesystems (tmpfs, as root) refusing a run and filling up mid-run under a real
torch and a real TensorFlow training."""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

import collect.command
import collect.writer
from collect import preflight
from collect.options import SessionOptions
from collect.session import run_session
from runformat import read_json
from runformat.diskfull import DISK_FULL, Reserve, disk_full_in, format_bytes

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
MB = 1_000_000
# `python -m collect timed`'s plan for the issue's example: `collect_cpu.sh 90s` (tf small, export on).
ISSUE_PLAN = preflight.Plan(
    preset="small", framework="tf", device="cpu", budget_s=90, interval_s=1.0, export=True, infer=True, cpus=2
)
GRACEFUL = """
import signal, sys, time
def stop(signum, frame):
    print("got", signal.Signals(signum).name, flush=True)
    sys.exit(0)
signal.signal(signal.SIGINT, stop)
print("ready", flush=True)
time.sleep(60)
"""
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root (CI runs as root)")


# ---- the estimate -----------------------------------------------------------------------------------


def test_the_checkpoint_estimate_matches_the_measured_checkpoints() -> None:
    # ckpt-N.data + .index of a small TF run; ckpt-N.pt of a small torch run (both on this VM)
    for framework, measured in (("tf", 124_353_050), ("torch", 124_271_809)):
        estimated = preflight.checkpoint_bytes(framework, "small")
        assert measured <= estimated <= 1.01 * measured
    small, standard = (preflight.checkpoint_bytes("torch", preset) for preset in ("small", "standard"))
    assert 340 * MB < standard < 350 * MB and standard > 2.7 * small


def test_checkpoints_on_disk_at_once() -> None:
    plan = ISSUE_PLAN
    assert preflight.checkpoints_at_once(plan) == 2  # at 60 s and at the end
    with_budget = lambda budget_s, keep=3: preflight.checkpoints_at_once(  # noqa: E731
        preflight.Plan(**{**plan.__dict__, "budget_s": budget_s, "keep_checkpoints": keep})
    )
    assert with_budget(59.9) == 1 and with_budget(60.0) == 2
    assert with_budget(180.0) == 4 and with_budget(3600.0) == 4  # 3 kept + the one being written
    assert with_budget(3600.0, keep=1) == 2


def test_the_verdict_at_its_boundaries() -> None:
    assert preflight.verdict(1000, 999) == "too little"
    assert preflight.verdict(1000, 1000) == "tight"
    assert preflight.verdict(1000, 1499) == "tight"
    assert preflight.verdict(1000, 1500) == "ok"
    assert preflight.verdict(1000, None) == "unknown"


def test_the_issue_example_is_refused_with_both_figures_and_the_ways_out() -> None:
    found = preflight.estimate(ISSUE_PLAN)
    assert 380 * MB < found.total_bytes < 400 * MB  # 2 checkpoints, the export and its ONNX copy
    assert list(found.parts)[:2] == ["checkpoints", "export"]
    line = preflight.problem_line(ISSUE_PLAN, found, 40 * MB, "--data-dir D (on /d)")
    assert "\n" not in line
    assert f"about {format_bytes(found.total_bytes)} (" in line
    assert "--data-dir D (on /d) has 40.0 MB free" in line
    assert "checkpoints 2 x 125 MB" in line
    assert line.endswith("try another --data-dir or no export (--no-export)")  # 1 kept would not help
    long_run = preflight.Plan(**{**ISSUE_PLAN.__dict__, "budget_s": 75 * 60})
    long_line = preflight.problem_line(long_run, preflight.estimate(long_run), 40 * MB, "D")
    assert "checkpoints 4 x 125 MB" in long_line
    assert "fewer checkpoints kept (--keep-checkpoints 1)" in long_line


def test_what_each_plan_writes() -> None:
    bare = preflight.estimate(preflight.Plan(**{**ISSUE_PLAN.__dict__, "export": False}))
    assert set(bare.parts) == {"checkpoints", "telemetry", "step log", "records"}
    other_node = preflight.estimate(preflight.Plan(**{**ISSUE_PLAN.__dict__, "writes_training": False}))
    assert set(other_node.parts) == {"telemetry", "records"}
    sweep = preflight.estimate(preflight.Plan(**{**ISSUE_PLAN.__dict__, "runs": 3}))
    assert sweep.parts["checkpoints"] == 3 * preflight.estimate(ISSUE_PLAN).parts["checkpoints"]
    fast = preflight.estimate(preflight.Plan(**{**ISSUE_PLAN.__dict__, "interval_s": 0.01}))
    assert fast.parts["telemetry"] == 100 * preflight.estimate(ISSUE_PLAN).parts["telemetry"]
    generating = preflight.estimate(preflight.Plan(**{**ISSUE_PLAN.__dict__, "dataset_bytes": 40 * MB}))
    assert generating.total_bytes == preflight.estimate(ISSUE_PLAN).total_bytes + 40 * MB


def test_a_full_disk_is_recognised_in_every_wording(tmp_path: Path) -> None:
    plain = disk_full_in(OSError(errno.ENOSPC, "No space left on device"), tmp_path / "f")
    assert plain is not None and plain.path == str(tmp_path / "f") and plain.free_bytes is not None
    quota = disk_full_in(OSError(errno.EDQUOT, "Disk quota exceeded", str(tmp_path / "q")))
    assert quota is not None and "Disk quota exceeded" in quota.line()
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError:
            raise RuntimeError("PytorchStreamWriter failed writing file data/3") from None
    except RuntimeError as torch_like:
        assert disk_full_in(torch_like) is None  # `from None` hides the cause: not guessed
    tf_like = RuntimeError(f"{{function_node SaveV2}} {tmp_path}/ckpt-5_temp/part-0; No space left on device")
    assert disk_full_in(tf_like).path == f"{tmp_path}/ckpt-5_temp/part-0"  # type: ignore[union-attr]
    assert disk_full_in(OSError(errno.EFBIG, "File too large")) is None


# ---- the collector's own writes, a fake at the boundary ------------------------------------------------


class _FillingOs(SimpleNamespace):
    """collect.writer's `os`: after `rows` writes, half a write goes through, then the disk is full."""

    def __init__(self, rows: int) -> None:
        super().__init__()
        self.left = rows

    def __getattr__(self, name: str) -> object:
        return getattr(os, name)

    def write(self, fd: int, data: bytes) -> int:
        self.left -= 1
        if self.left == -1:
            return os.write(fd, data[: len(data) // 2])
        if self.left < -1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return os.write(fd, data)


def _session(tmp_path: Path) -> SessionOptions:
    return SessionOptions(
        data_dir=tmp_path, interval_s=0.02, duration_s=30, command=[PYTHON, "-c", GRACEFUL],
        echo_output=False, raise_priority=False,
    )  # fmt: skip


def _telemetry_rows(run_dir: Path) -> tuple[str, list[dict[str, str]]]:
    text = (run_dir / "telemetry.csv").read_text()
    return text, list(csv.DictReader(io.StringIO(text)))


def test_a_telemetry_row_the_disk_has_no_room_for_stops_the_run_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(collect.writer, "os", _FillingOs(rows=1 + 40))  # the header and 40 rows
    result = run_session(_session(tmp_path))
    err = capsys.readouterr().err
    run_dir = result.run_dir
    assert (result.exit_code, result.end_reason) == (1, "failed")
    said = [line for line in err.splitlines() if f"{DISK_FULL}: cannot write" in line]
    assert len(said) == 1
    assert said[0].startswith(f"collect: disk full: cannot write {run_dir}/telemetry.csv: No space left on")
    assert " device (" in said[0] and " free on " in said[0] and said[0].endswith("; stopping")
    assert "collect: SIGINT to the command (disk full)" in err and "Traceback" not in err
    record = read_json(run_dir / "run.json")
    assert record["end_reason"] == "failed" and record["exit_code"] == 0  # stopped gracefully
    assert record["end_unix"] and record["end_utc"] and record["error"] == said[0][len("collect: ") : -10]
    failure = record["failure"]
    assert {k: failure[k] for k in ("reason", "path", "by")} == (
        {"reason": DISK_FULL, "path": "telemetry.csv", "by": "collector"}
    )
    assert isinstance(failure["free_bytes"], int)
    text, rows = _telemetry_rows(run_dir)
    assert text.endswith("\n") and len(rows) == 40 == record["samples"]  # the half row is gone
    assert all(row["time_unix"] and None not in row.values() for row in rows)
    assert (run_dir / "command.log").read_text() == "ready\ngot SIGINT\n"
    assert not list(run_dir.glob(".reserve-*"))


def test_output_the_disk_had_no_room_for_is_logged_once_the_reserve_is_freed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class FullLog(io.RawIOBase):
        def writable(self) -> bool:
            return True

        def write(self, data: object) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    opened: list[str] = []

    def open_log(path: object, mode: str = "r", *args: object, **kwargs: object) -> object:
        opened.append(mode)
        return FullLog() if len(opened) == 1 else open(path, mode, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(collect.command, "open", open_log, raising=False)
    options = _session(tmp_path)
    options.duration_s = 0.5
    result = run_session(options)
    record = read_json(result.run_dir / "run.json")
    assert record["end_reason"] == "deadline"
    assert record["sampler"]["command_log_error"] == "cannot write command.log: No space left on device"
    assert (result.run_dir / "command.log").read_text() == "ready\ngot SIGINT\n"  # written at the end
    assert opened == ["ab", "ab"]


def test_a_reserve_holds_its_room_until_released(tmp_path: Path) -> None:
    reserve = Reserve.create(tmp_path, "test", 300_000)
    assert reserve.held and reserve.path.name == ".reserve-test"
    assert os.stat(reserve.path).st_blocks * 512 >= 300_000  # allocated, not a sparse file
    reserve.release()
    reserve.release()
    assert not reserve.path.exists()
    assert not Reserve.create(tmp_path / "missing", "test", 1000).held


# ---- small real filesystems -------------------------------------------------------------------------


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(where)], check=False)


def fill(directory: Path, leave_bytes: int) -> Path:
    """The second writer: takes all the free space of directory's filesystem but `leave_bytes`."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    size = 0
    try:
        for block in (bytes(1 << 20), bytes(4096)):
            with contextlib.suppress(OSError):
                while True:
                    size += os.write(fd, block)
        os.ftruncate(fd, max(0, size - leave_bytes))
    finally:
        os.close(fd)
    return filler


def _refused(data_dir: Path, command: list[str]) -> tuple[subprocess.CompletedProcess[str], str]:
    """`command` run on data_dir, which it must refuse before anything starts: the result, its one line."""
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert list(data_dir.iterdir()) == []  # nothing created
    (line,) = done.stderr.splitlines()
    assert line.startswith("python -m collect timed: error: not enough free space for this run: it writes")
    return done, line


@needs_root
def test_a_run_that_cannot_fit_is_refused_before_it_starts(tmp_path: Path) -> None:
    """The issue's example: `collect_cpu.sh 90s --data-dir D` on a 40 MB filesystem."""
    with tmpfs(tmp_path / "small", "40m") as data_dir:
        done, line = _refused(data_dir, [str(REPO / "scripts" / "collect_cpu.sh"), "90s", "--data-dir",
                                         str(data_dir)])  # fmt: skip
    assert f"--data-dir {data_dir} (on {data_dir}) has 41.9 MB free" in line  # 40 MiB
    assert "checkpoints 2 x 125 MB" in line and "dataset 39.7 MB" in line  # none there: it would be generated
    assert line.endswith("try another --data-dir or no export (--no-export)")
    assert done.stdout == ""


@needs_root
def test_a_job_whose_recording_cannot_fit_is_refused_before_it_starts(tmp_path: Path) -> None:
    """`collect timed 2h --interval 10ms -- COMMAND` on a 1 MB filesystem: its telemetry alone cannot fit
    (the job's own files are not counted), so nothing starts."""
    with tmpfs(tmp_path / "tiny", "1m") as data_dir:
        job = [PYTHON, "-c", "print('never')"]
        done, line = _refused(data_dir, [PYTHON, "-m", "collect", "timed", "2h", "--interval", "10ms",
                                         "--data-dir", str(data_dir), "--", *job])  # fmt: skip
    assert "telemetry" in line and "checkpoints" not in line and "(the job's own files not counted)" in line
    assert "never" not in done.stdout
    small = preflight.estimate(preflight.job_plan(60, 1.0, "cpu"))
    assert set(small.parts) == {"telemetry", "records"} and small.checkpoints == 0


@needs_root
def test_the_collector_ends_its_records_true_on_a_disk_another_job_filled(tmp_path: Path) -> None:
    """Sampling a command on a tmpfs that another writer fills to the last byte: the final run.json goes
    into the room the collector's reserve held."""
    with tmpfs(tmp_path / "scratch", "4m") as data_dir:
        process = subprocess.Popen(
            [PYTHON, "-m", "collect", "run", "--data-dir", str(data_dir), "--interval", "10ms",
             "--duration", "60s", "--", PYTHON, "-c", GRACEFUL],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        try:
            while not list(data_dir.glob("runs/*/command.log")) or "ready" not in _log(data_dir):
                assert process.poll() is None, process.communicate()
                time.sleep(0.05)
            fill(data_dir, leave_bytes=0)
            out, err = process.communicate(timeout=60)
        finally:
            _stop(process)
        (run_dir,) = (data_dir / "runs").iterdir()
        record = read_json(run_dir / "run.json")
        text, rows = _telemetry_rows(run_dir)
        reserves = list(run_dir.glob(".reserve-*"))
        log = _log(data_dir)
        _readers_say_disk_full(run_dir, "telemetry.csv")
    assert process.returncode == 1, err
    line = _console_line(err, f"collect: {DISK_FULL}: cannot write {run_dir}/telemetry.csv: No space left")
    assert line.endswith(f"(0 B free on {data_dir}); stopping") and "Traceback" not in out + err
    assert (record["end_reason"], record["exit_code"]) == ("failed", 0) and record["end_unix"]
    expected = {"reason": DISK_FULL, "path": "telemetry.csv", "free_bytes": 0, "by": "collector"}
    assert record["failure"] == expected
    assert text.endswith("\n") and len(rows) == record["samples"] > 0 and not reserves
    assert log == "ready\ngot SIGINT\n"


def _readers_say_disk_full(run_dir: Path, path: str) -> None:
    """The dashboard and the sizing report show the run as failed because the disk filled up."""
    from dashboard.runs import open_run_dir
    from sizing.analysis.load import load_run_dir
    from sizing.analysis.runchecks import incomplete_reason

    assert open_run_dir(run_dir).end_reason == "failed (disk full)"
    run = load_run_dir(run_dir)
    assert incomplete_reason(run.meta, run.training_info) == (
        f"run failed: the disk filled up ({path} could not be written)"
    )


def _log(data_dir: Path) -> str:
    return next(data_dir.glob("runs/*/command.log")).read_text()


def _run_until_checkpoint(
    data_dir: Path, dataset: Path, extra: list[str], checkpoint_glob: str
) -> tuple[subprocess.Popen[str], Path, dict[str, int]]:
    process = subprocess.Popen(
        [str(REPO / "scripts" / "collect_cpu.sh"), "3m", "--data-dir", str(data_dir),
         "--dataset", str(dataset), "--keep-checkpoints", "1", "--checkpoint-every", "3s", "--no-export",
         *extra],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 600
    while not list(data_dir.glob(f"runs/*/checkpoints/{checkpoint_glob}")):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"no checkpoint (exit {process.returncode}): {process.communicate()}")
        time.sleep(0.2)
    (run_dir,) = (data_dir / "runs").iterdir()
    return process, run_dir, _checkpoints(run_dir)


def _checkpoints(run_dir: Path) -> dict[str, int]:
    """The checkpoint files and their sizes (not a torch checkpoint being written, a dot file)."""
    files = (run_dir / "checkpoints").iterdir()
    return {path.name: path.stat().st_size for path in files if not path.name.startswith(".")}


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _check_steps_and_rows(run_dir: Path, training: dict, record: dict) -> None:
    """No completed step or telemetry row lost: each has its whole row."""
    with (run_dir / "training.csv").open(newline="") as handle:
        steps = list(csv.DictReader(handle))
    assert len(steps) == training["steps"] == training["global_step"] == int(steps[-1]["step"])
    text, rows = _telemetry_rows(run_dir)
    assert text.endswith("\n") and len(rows) == record["samples"] > 0
    assert not list(run_dir.glob(".reserve-*")) and not list(run_dir.glob(".*.tmp"))


def _console_line(err: str, starts: str) -> str:
    (line,) = [line for line in err.splitlines() if f"{DISK_FULL}: cannot write" in line]
    assert line.startswith(starts), line
    return line


def _fill_and_finish(process: subprocess.Popen, data_dir: Path, run_dir: Path, leave_bytes: int) -> tuple:
    """Another job fills the disk to `leave_bytes`; the run's console, both JSON files, its log (rows and
    steps checked whole) and the checkpoints left (name: size)."""
    try:
        fill(data_dir, leave_bytes=leave_bytes)
        out, err = process.communicate(timeout=300)
    finally:
        _stop(process)
    training, record = read_json(run_dir / "training.json"), read_json(run_dir / "run.json")
    log = (run_dir / "command.log").read_text()
    _check_steps_and_rows(run_dir, training, record)
    left = {path.name: path.stat().st_size for path in (run_dir / "checkpoints").iterdir()}
    return out, err, training, record, log, left


@pytest.mark.slow
@needs_root
def test_a_torch_training_whose_checkpoint_finds_the_disk_full(tmp_path: Path, tiny_dataset: Path) -> None:
    """Another job takes all but 2 MB after the first checkpoint: the next one cannot be written."""
    with tmpfs(tmp_path / "scratch", "300m") as data_dir:
        process, run_dir, kept = _run_until_checkpoint(
            data_dir, tiny_dataset, ["--framework", "torch", "--interval", "1s"], "ckpt-*.pt"
        )
        out, err, training, record, log, left = _fill_and_finish(process, data_dir, run_dir, 2 * MB)
        _readers_say_disk_full(run_dir, training["failure"]["path"])
    assert process.returncode == 1
    assert "warning: free space is tight: this run writes about 252 MB" in err  # and it went on
    line = _console_line(err, f"The training stopped: {DISK_FULL}: cannot write {run_dir}/checkpoints/ckpt-")
    assert ".pt: No space left on device (" in line and f" free on {data_dir}); its traceback is in " in line
    assert "Traceback" not in out + err and "Traceback" in log and "DiskFullError" in log
    (good,) = kept
    assert left == kept  # the last good checkpoint whole, the half-written one gone
    failure = {"reason": DISK_FULL, "path": line.split(f"{run_dir}/")[1].split(":")[0], "by": "training"}
    assert failure["path"] != f"checkpoints/{good}"
    for found in (training["failure"], record["failure"]):
        assert {k: found[k] for k in failure} == failure and found["free_bytes"] < 2 * MB
    assert training["status"] == "failed" and training["end_unix"]
    assert training["last_checkpoint"] == f"checkpoints/{good}"
    assert training["error"].startswith(f"{DISK_FULL}: cannot write {run_dir}/{failure['path']}")
    assert (record["end_reason"], record["exit_code"]) == ("failed", 1) and record["end_unix"]


@pytest.mark.slow
@needs_root
def test_a_tensorflow_training_on_a_disk_that_fills_up(tmp_path: Path, tiny_dataset: Path) -> None:
    """Another job takes every free byte after the first checkpoint. Whoever writes next finds the disk
    full: the training (its next checkpoint or step row) or the collector (its next telemetry row), which
    then stops the training like a deadline would; its final checkpoint cannot be written either."""
    with tmpfs(tmp_path / "scratch", "300m") as data_dir:
        # TensorFlow's `checkpoint` file is written once the checkpoint is whole
        process, run_dir, kept = _run_until_checkpoint(
            data_dir, tiny_dataset, ["--interval", "0.5s"], "checkpoint"
        )
        out, err, training, record, log, left = _fill_and_finish(process, data_dir, run_dir, 0)
    assert process.returncode == 1
    assert "Traceback" not in out + err and "Traceback" in log
    assert left == kept and sorted(kept) == ["checkpoint", "ckpt-1.data-00000-of-00001", "ckpt-1.index"]
    assert training["status"] == "failed" and training["last_checkpoint"] == "checkpoints/ckpt-1"
    assert training["failure"]["reason"] == DISK_FULL and training["failure"]["by"] == "training"
    assert training["failure"]["path"] in ("training.csv", f"checkpoints/ckpt-{training['global_step']}")
    assert (record["end_reason"], record["exit_code"]) == ("failed", 1) and record["end_unix"]
    failure = record["failure"]
    assert failure["reason"] == DISK_FULL
    if failure["by"] == "collector":
        assert failure["path"] == "telemetry.csv"
        _console_line(err, f"collect: {DISK_FULL}: cannot write {run_dir}/telemetry.csv: No space left")
        assert "collect: SIGINT to the command (disk full)" in err
    else:
        assert failure == training["failure"]
        _console_line(err, f"The training stopped: {DISK_FULL}: cannot write {run_dir}/{failure['path']}")


def test_a_full_disk_in_a_phase_after_training_is_recorded_as_such(tmp_path: Path) -> None:
    """Export, evaluation, detections or inference finding the disk full: training.json's `failure` names the
    file and the phase (the training's own status stays), and the collector carries it into run.json."""
    from collect.run_record import command_failure
    from runformat import write_json_atomic
    from training.train_command import _phase_disk_full

    write_json_atomic(tmp_path / "training.json", {"status": "deadline", "global_step": 12})
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "model" / "model.onnx"))
    line = _phase_disk_full(tmp_path, "infer", full)
    assert line is not None and line.startswith(f"{DISK_FULL}: cannot write {tmp_path}/model/model.onnx: ")
    training = read_json(tmp_path / "training.json")
    assert training["status"] == "deadline" and training["global_step"] == 12
    assert {k: training["failure"][k] for k in ("reason", "path", "by", "phase")} == {
        "reason": DISK_FULL, "path": "model/model.onnx", "by": "training", "phase": "infer"}  # fmt: skip
    assert command_failure(tmp_path) == training["failure"]
    assert _phase_disk_full(tmp_path, "export", ValueError("a bad graph")) is None  # others: as before
