"""collect.slurm: the allocation in run.json, the run id's job tag, and why Slurm stopped a job.

The real cluster (sbatch, scancel) is in tests/timed/test_slurm_cluster.py; these cover the parsing of what
Slurm says, including the cases one machine cannot produce in a test (a node failure, a requeue).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collect import slurm
from collect.session import SessionOptions, run_session
from runformat import is_valid_run_id, read_json

JOB_ENV = {
    "SLURM_JOB_ID": "4711",
    "SLURM_JOB_NAME": "workbench",
    "SLURM_JOB_PARTITION": "gpu",
    "SLURM_JOB_NODELIST": "node[01-02]",
    "SLURM_JOB_NUM_NODES": "2",
    "SLURM_NODEID": "1",
    "SLURMD_NODENAME": "node02",
    "SLURM_CPUS_PER_TASK": "16",
    "SLURM_CPUS_ON_NODE": "16",
    "SLURM_JOB_CPUS_PER_NODE": "16(x2)",
    "SLURM_JOB_GPUS": "2,3",
    "CUDA_VISIBLE_DEVICES": "0,1",
    "SLURM_GPUS_ON_NODE": "2",
    "SLURM_CLUSTER_NAME": "lab",
}
SCONTROL = (
    "JobId=4711 JobName=workbench UserId=ann(1000) JobState=COMPLETING Reason=None Dependency=(null) "
    "RunTime=00:10:02 TimeLimit=00:30:00 SubmitTime=2026-11-23T10:00:00 StartTime=2026-11-23T10:00:00 "
    "EndTime=2026-11-23T10:10:02 Partition=gpu NodeList=node[01-02] StdErr=/shared/wb-4711.out "
    "StdOut=/shared/wb-4711.out\n"
)


def test_allocation_outside_slurm_is_none() -> None:
    assert slurm.allocation({"PATH": "/bin"}) is None
    assert slurm.run_id_suffix({}) == ""


def test_allocation_reads_the_job_environment() -> None:
    record = slurm.allocation(JOB_ENV)
    assert record is not None
    assert record["job_id"] == "4711" and record["partition"] == "gpu" and record["nodelist"] == "node[01-02]"
    assert record["nnodes"] == 2 and record["node_rank"] == 1 and record["cpus_per_task"] == 16
    assert record["gpus"] == ["2", "3"]  # SLURM_JOB_GPUS first: the node's own GPU indices
    assert record["cuda_visible_devices"] == "0,1" and record["gpus_on_node"] == 2
    assert record["array_job_id"] is None and record["mem_per_node_mb"] is None  # not set: unknown


def test_gpus_fall_back_to_cuda_visible_devices_and_unset_is_unknown_not_none() -> None:
    env = {"SLURM_JOB_ID": "1", "CUDA_VISIBLE_DEVICES": "0"}
    assert slurm.allocation(env)["gpus"] == ["0"]
    assert slurm.allocation({"SLURM_JOB_ID": "1"})["gpus"] is None
    assert slurm.allocation({"SLURM_JOB_ID": "1", "SLURM_JOB_GPUS": ""})["gpus"] == []


def test_run_id_suffix_carries_the_job_and_array_task() -> None:
    assert slurm.run_id_suffix({"SLURM_JOB_ID": "4711"}) == "-job4711"
    array = {"SLURM_JOB_ID": "4713", "SLURM_ARRAY_JOB_ID": "4711", "SLURM_ARRAY_TASK_ID": "2"}
    assert slurm.run_id_suffix(array) == "-job4711_2"
    assert is_valid_run_id("20261123T100000Z-gpu-node02" + slurm.run_id_suffix(array))


def test_a_run_in_a_slurm_job_records_the_allocation_and_the_job_in_its_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in JOB_ENV.items():
        monkeypatch.setenv(name, value)
    result = run_session(SessionOptions(data_dir=tmp_path, interval_s=0.05, duration_s=0.2))
    assert result.run_dir.name.endswith("-job4711")
    record = read_json(result.run_dir / "run.json")
    assert record["system"]["slurm"]["job_id"] == "4711"
    assert record["system"]["slurm"]["gpus"] == ["2", "3"]


def test_a_run_outside_slurm_has_slurm_null(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    result = run_session(SessionOptions(data_dir=tmp_path, interval_s=0.05, duration_s=0.1))
    assert read_json(result.run_dir / "run.json")["system"]["slurm"] is None
    assert "job" not in result.run_dir.name.rsplit("-", 1)[-1]


def test_parse_scontrol_one_line() -> None:
    job = slurm.parse_scontrol(SCONTROL)
    assert job["JobState"] == "COMPLETING" and job["TimeLimit"] == "00:30:00" and job["JobId"] == "4711"


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("*** JOB 4711 ON node01 CANCELLED AT 2026-11-23T10:10:02 ***", "cancelled (scancel)"),
        (
            "*** JOB 4711 ON node01 CANCELLED AT 2026-11-23T10:30:00 DUE TO TIME LIMIT ***",
            "time limit (--time) reached",
        ),
        ("*** JOB 4711 ON node02 CANCELLED AT 2026-11-23T10:12:00 DUE TO NODE FAILURE ***", "node failure"),
        ("*** JOB 4711 ON node02 CANCELLED AT 2026-11-23T10:12:00 DUE TO PREEMPTION ***", "preempted"),
        ("*** JOB 99 ON node01 CANCELLED AT 2026-11-23T10:10:02 ***", None),  # another job's line
    ],
)
def test_the_reason_slurmstepd_wrote_into_the_job_output(line: str, reason: str | None) -> None:
    job = slurm.parse_scontrol(SCONTROL.replace("TimeLimit=00:30:00", "TimeLimit=UNLIMITED"))
    stop = slurm.stop_reason(job, time.time(), f"training...\nslurmstepd-node01: error: {line}\n")
    assert stop["reason"] == reason
    assert stop["job_state"] == "COMPLETING"


def test_a_sigterm_shortly_before_the_time_limit_is_the_time_limit_warning() -> None:
    job = slurm.parse_scontrol(SCONTROL.replace("COMPLETING", "RUNNING"))
    limit = slurm._slurm_time("2026-11-23T10:30:00")
    assert limit is not None
    stop = slurm.stop_reason(job, limit - 60.0, "")
    assert stop["reason"] == "time limit (--time): warned 60 s before it (--signal)"
    assert stop["time_left_s"] == 60.0
    # slurmstepd writes a JOB ... CANCELLED line for the warning signal too: RUNNING says it was a signal
    warned_line = "*** JOB 4711 ON node01 CANCELLED AT 2026-11-23T10:29:00 ***"
    assert slurm.stop_reason(job, limit - 112.0, warned_line)["reason"].startswith("time limit (--time)")
    step_line = "*** STEP 4711.0 ON node01 CANCELLED AT 2026-11-23T10:10:00 ***"
    early = slurm.stop_reason(job, limit - 1200.0, step_line)
    assert early["reason"] == "signalled while running (scancel --signal, or an early --signal)"
    assert slurm.stop_reason(job, limit - 1200.0, "")["reason"] is None  # a kill by hand: not known
    signalling = slurm.parse_scontrol(SCONTROL.replace("COMPLETING", "SIGNALING"))  # the warning in flight
    assert slurm.stop_reason(signalling, limit - 60.0, "")["reason"].startswith("time limit (--time): warned")


def test_the_last_line_of_a_job_on_its_way_out_says_why_it_ended() -> None:
    job = slurm.parse_scontrol(SCONTROL)  # COMPLETING
    output = (
        "*** JOB 4711 ON node01 CANCELLED AT 2026-11-23T10:29:00 ***\n"  # the --signal warning
        "*** JOB 4711 ON node01 CANCELLED AT 2026-11-23T10:30:00 DUE TO TIME LIMIT ***\n"
    )
    assert slurm.stop_reason(job, time.time(), output)["reason"] == "time limit (--time) reached"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("00:30:00", 1800.0), ("1-02:00:00", 93600.0), ("05:00", 300.0), ("UNLIMITED", None), ("", None)],
)
def test_slurm_durations(text: str, seconds: float | None) -> None:
    assert slurm._slurm_duration_s(text) == seconds


def _write_run(data_dir: Path, name: str, job_id: str, end_reason: str, host: str = "node01") -> Path:
    run_dir = data_dir / "runs" / name
    run_dir.mkdir(parents=True)
    record = {"run_id": name, "host": host, "end_reason": end_reason, "system": {"slurm": {"job_id": job_id}}}
    (run_dir / "run.json").write_text(json.dumps(record))
    return run_dir


def test_record_stop_writes_every_interrupted_run_of_the_job(tmp_path: Path) -> None:
    (tmp_path / "wb-4711.out").write_text("*** JOB 4711 ON node01 CANCELLED AT 2026-11-23T10:10:02 ***\n")
    first = _write_run(tmp_path, "20261123T100000Z-gpu-node01-job4711", "4711", "interrupted")
    second = _write_run(tmp_path, "20261123T100000Z-gpu-node02-job4711", "4711", "interrupted", "node02")
    other = _write_run(tmp_path, "20261123T100000Z-gpu-node01-job47110", "47110", "interrupted")
    done = _write_run(tmp_path, "20261123T090000Z-gpu-node01-job4711-2", "4711", "completed")
    scontrol = SCONTROL.replace("/shared/wb-4711.out", str(tmp_path / "wb-4711.out"))
    written = slurm.record_stop(tmp_path, JOB_ENV, 1795000000.0, scontrol=lambda job_id: scontrol)
    assert sorted(written) == sorted([first, second])
    for run_dir in (first, second):
        record = read_json(run_dir / "run.json")
        assert record["slurm_stop"]["reason"] == "cancelled (scancel)"
        assert record["notes"] == ["stopped by Slurm: cancelled (scancel) (job state COMPLETING)"]
    assert "slurm_stop" not in read_json(other / "run.json")
    assert "slurm_stop" not in read_json(done / "run.json")


def test_record_stop_without_scontrol_says_why_the_reason_is_unknown(tmp_path: Path) -> None:
    run_dir = _write_run(tmp_path, "20261123T100000Z-cpu-node01-job4711", "4711", "interrupted")

    def no_scontrol(job_id: str) -> str:
        raise FileNotFoundError(2, "No such file or directory", "scontrol")

    slurm.record_stop(tmp_path, JOB_ENV, 1795000000.0, scontrol=no_scontrol)
    stop = read_json(run_dir / "run.json")["slurm_stop"]
    assert stop["reason"] is None and stop["not_known_because"].startswith("scontrol: ")


def test_record_stop_command_outside_slurm_is_one_line_exit_2(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    done = subprocess.run(
        [sys.executable, "-m", "collect.slurm", "record-stop", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        env={**env, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    assert done.returncode == 2
    assert done.stderr.strip() == "python -m collect.slurm: error: not in a Slurm job (no SLURM_JOB_ID)"


def test_signals_at_once_are_one_stop_for_the_collector(tmp_path: Path) -> None:
    """Slurm signals every process of a job and srun/the batch script pass it on: the command still gets
    SIGINT, its grace period, and only then SIGTERM (two stops within a second are one)."""
    script = tmp_path / "child.sh"
    log = tmp_path / "signals.log"
    script.write_text(
        f"trap 'echo INT $(date +%s.%N) >> {log}' INT\n"
        f"trap 'echo TERM $(date +%s.%N) >> {log}; exit 0' TERM\n"
        "for i in $(seq 200); do sleep 0.05; done\n"
    )
    options = SessionOptions(
        data_dir=tmp_path,
        interval_s=0.05,
        command=["bash", str(script)],
        echo_output=False,
        stop_grace_s=(1.5, 5.0),
    )

    def twice(run_dir: Path) -> None:
        import threading

        def fire() -> None:
            time.sleep(0.5)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.3)  # a moment later, as the batch script's or srun's copy of it arrives
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=fire, daemon=True).start()

    result = run_session(options, on_start=twice)
    assert result.end_reason == "interrupted"
    (first, at_int), (second, at_term) = (line.split() for line in log.read_text().splitlines())
    assert (first, second) == ("INT", "TERM")
    assert float(at_term) - float(at_int) >= 1.2  # SIGTERM only after SIGINT's grace, not at once


FAKE_SRUN = """#!/bin/bash
echo $$ >"$FAKES/srun.pid"
trap 'exit 130' TERM
while :; do sleep 0.1; done
"""
FAKE_SCONTROL = """#!/bin/bash
echo "JobId=$SLURM_JOB_ID JobState=$FAKE_JOB_STATE Reason=None"
"""
FAKE_SCANCEL = """#!/bin/bash
echo "$@" >>"$FAKES/scancel.args"
kill -TERM "$(cat "$FAKES/srun.pid")"
"""


@pytest.mark.parametrize(
    ("state", "passed_on"), [("RUNNING", True), ("SIGNALING", True), ("COMPLETING", False)]
)
def test_the_batch_script_passes_the_stop_on_while_the_job_runs(
    tmp_path: Path, state: str, passed_on: bool
) -> None:
    """scontrol says SIGNALING while slurmctld still sends the --signal warning that reached the script (a
    loaded controller; seen in the real cluster's test): a running job, so the stop goes to its steps. The
    race cannot be made on demand in a real cluster, so srun, scontrol and scancel are stand-ins here."""
    fakes = tmp_path / "bin"
    fakes.mkdir()
    for name, text in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL), ("scancel", FAKE_SCANCEL)):
        (fakes / name).write_text(text)
        (fakes / name).chmod(0o755)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    env = {
        **os.environ, "PATH": f"{fakes}:{os.environ['PATH']}", "FAKES": str(fakes), "FAKE_JOB_STATE": state,
        "SLURM_JOB_ID": "5", "DATA_DIR": str(data_dir),
        "WORKBENCH_VENV": str(Path(sys.executable).parents[1]),
    }  # fmt: skip
    sbatch = Path(__file__).resolve().parents[2] / "scripts" / "slurm" / "workbench.sbatch"
    job = subprocess.Popen(
        ["bash", str(sbatch), "--dataset", str(tmp_path)], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 30
        while not (fakes / "srun.pid").is_file() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (fakes / "srun.pid").is_file(), "the batch script never started srun"
        job.send_signal(signal.SIGTERM)  # what --signal=B:TERM does
        if not passed_on:
            time.sleep(1.0)
            os.kill(int((fakes / "srun.pid").read_text()), signal.SIGTERM)  # Slurm ending the step itself
        _, stderr = job.communicate(timeout=30)
    finally:
        job.kill()
    assert job.returncode == 130
    if passed_on:
        assert f"stop signal passed to the job's steps (job {state})" in stderr
        assert (fakes / "scancel.args").read_text().split() == ["--signal=TERM", "5"]
    else:
        assert "stop signal with the job COMPLETING: Slurm stops its steps itself" in stderr
        assert not (fakes / "scancel.args").exists()
