"""scripts/slurm/workbench.sbatch against a real Slurm: a one-node cluster on this machine (slurmcluster.py),
short torch trainings submitted with sbatch, a job array task, a scancel mid-run and a time limit.

Without root (or without Debian's slurm-wlm and munge) the cluster tests skip with that reason; the checks
that need no scheduler (the data directory, what each node would run) run everywhere.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from slurmcluster import SlurmCluster, why_no_cluster

REPO = Path(__file__).resolve().parents[2]
SBATCH = REPO / "scripts" / "slurm" / "workbench.sbatch"
PY = REPO / ".venv" / "bin" / "python"
NO_CLUSTER = why_no_cluster()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    if NO_CLUSTER:
        pytest.skip(NO_CLUSTER)
    running = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        running.start(kill_wait_s=60)
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from training.dataset import generate_dataset

    out = tmp_path_factory.mktemp("slurm-dataset") / "waldo"
    generate_dataset(out, size=256, train=16, val=4, seed=3)
    return out


def _quick_steps(dataset: Path) -> list[str]:
    """Batch 1: a step that ends well within the collector's 20 s SIGINT grace even on a busy 2-core machine
    (the stop waits for the current step, then the final checkpoint)."""
    return ["--dataset", str(dataset), "--no-export", "--batch", "1"]


def _export(data_dir: Path, **variables: str) -> str:
    """The job's environment; one torch thread: these jobs prove the stop paths, not the speed, and leave the
    other core to the rest of the suite."""
    settings = {
        "DATA_DIR": str(data_dir), "WORKBENCH_DIR": str(REPO), "FRAMEWORK": "torch", "OMP_NUM_THREADS": "1",
        **variables,
    }  # fmt: skip
    return "--export=ALL," + ",".join(f"{name}={value}" for name, value in settings.items())


def _submit(cluster: SlurmCluster, *sbatch_args: str, wait: bool, timeout: float = 600) -> tuple[str, int]:
    """The job id, and sbatch's exit code or, with `wait`, the job's (as `sbatch --wait` gives it)."""
    done = cluster.client("sbatch", "--parsable", *sbatch_args, check=False)
    job_id = done.stdout.strip().split(";")[0]
    assert job_id.isdigit(), f"sbatch said {done.stdout!r} {done.stderr!r}\n{cluster.logs()}"
    return job_id, cluster.wait_for_job(job_id, timeout) if wait else done.returncode


def _only_run(data_dir: Path) -> Path:
    runs = list((data_dir / "runs").iterdir())
    assert len(runs) == 1, runs
    return runs[0]


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _wait_for(ready, what: str, timeout_s: float, cluster: SlurmCluster) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(1)
    raise AssertionError(f"timed out waiting for {what}\n{cluster.logs()}")


def _first_step_recorded(data_dir: Path) -> bool:
    return any(len(_rows(csv_path)) >= 1 for csv_path in (data_dir / "runs").glob("*/training.csv"))


@pytest.mark.slow
def test_an_array_task_on_a_cpu_node_leaves_its_run_directory(
    cluster: SlurmCluster, dataset: Path, tmp_path: Path
) -> None:
    data_dir = tmp_path / "shared"
    data_dir.mkdir()
    out = tmp_path / "job-%A_%a.out"
    job_id, code = _submit(
        cluster,
        "--array=0",
        "--cpus-per-task=2",
        f"--output={out}",
        _export(data_dir, DURATION="40s", NODE_TYPES="cpu"),
        str(SBATCH),
        "--dataset",
        str(dataset),
        "--no-export",
        "--max-steps",
        "3",
        wait=True,
    )
    output = (tmp_path / f"job-{job_id}_0.out").read_text()
    assert code == 0, output[-3000:] + cluster.logs()
    run_dir = _only_run(data_dir)
    assert run_dir.name.endswith(f"-cpu-{cluster.node}-job{job_id}_0")  # host, array job and task id
    run = json.loads((run_dir / "run.json").read_text())
    allocation = run["system"]["slurm"]
    assert allocation["array_job_id"] == job_id and allocation["array_task_id"] == "0"
    assert allocation["job_id"].isdigit() and allocation["partition"] == "cpu"
    assert allocation["cpus_per_task"] == 2 and allocation["nnodes"] == 1 and allocation["gpus"] is None
    assert allocation["cluster"] == "workbenchtest" and allocation["nodelist"] == cluster.node
    assert run["end_reason"] == "completed" and run["exit_code"] == 0 and "slurm_stop" not in run
    assert run["command"][run["command"].index("--framework") + 1] == "torch"
    training = json.loads((run_dir / "training.json").read_text())
    assert training["status"] == "completed" and training["steps"] == 3
    assert f"Recording into {run_dir}" in output


@pytest.mark.slow
def test_scancel_mid_run_stops_it_like_ctrl_c(cluster: SlurmCluster, dataset: Path, tmp_path: Path) -> None:
    data_dir = tmp_path / "shared"
    data_dir.mkdir()
    out = tmp_path / "job-%j.out"
    job_id, code = _submit(
        cluster,
        "--cpus-per-task=2",
        f"--output={out}",
        _export(data_dir, DURATION="10m"),
        str(SBATCH),
        *_quick_steps(dataset),
        wait=False,
    )
    assert code == 0
    _wait_for(lambda: _first_step_recorded(data_dir), "the first training step", 300, cluster)
    cluster.client("scancel", job_id)
    _wait_for(lambda: cluster.job_gone(job_id), "the job to end", 120, cluster)
    output = (tmp_path / f"job-{job_id}.out").read_text()
    run_dir = _only_run(data_dir)
    assert run_dir.name.endswith(f"-job{job_id}")
    run = json.loads((run_dir / "run.json").read_text())
    assert run["system"]["slurm"]["job_id"] == job_id
    assert run["end_reason"] == "interrupted", output[-3000:]
    assert run["slurm_stop"]["reason"] == "cancelled (scancel)", run["slurm_stop"]
    assert "stopped by Slurm: cancelled (scancel)" in run["notes"][-1]
    training = json.loads((run_dir / "training.json").read_text())
    assert training["status"] == "interrupted" and training["steps"] >= 1
    assert any((run_dir / "checkpoints").iterdir()), "no final checkpoint"
    assert len(_rows(run_dir / "telemetry.csv")) == run["samples"]  # every sample kept
    assert "second signal" not in (run_dir / "command.log").read_text()


@pytest.mark.slow
def test_the_time_limit_warning_stops_the_run_with_the_reason(
    cluster: SlurmCluster, dataset: Path, tmp_path: Path
) -> None:
    """--signal=B:TERM@60 with --time=2: the batch script gets SIGTERM about 60 s before the limit and passes
    the stop to the node's collector. slurmctld looks every 30 s (job_time_limit, PERIODIC_TIMEOUT) and sends
    it at the first look where the limit is under 60 + 30 s away: 30-60 s into the job. Slurm sends the
    warning once, to the batch step. On a loaded machine the job three times ran into its limit instead;
    slurmctld's debug log then showed the cause: the batch script read the job's state while slurmctld was
    still sending the warning, scontrol said SIGNALING, and the script took that for a job on its way out
    (fixed: SIGNALING is a running job; tests/collect/test_collect_slurm.py pins it)."""
    data_dir = tmp_path / "shared"
    data_dir.mkdir()
    out = tmp_path / "job-%j.out"
    job_id, code = _submit(
        cluster,
        "--cpus-per-task=2",
        "--time=2",
        "--signal=B:TERM@60",
        f"--output={out}",
        _export(data_dir, DURATION="10m"),
        str(SBATCH),
        *_quick_steps(dataset),
        wait=True,
        timeout=300,
    )
    output = (tmp_path / f"job-{job_id}.out").read_text()
    assert code == 130, output[-3000:] + cluster.logs()
    run = json.loads((_only_run(data_dir) / "run.json").read_text())
    why = f"{output[-3000:]}\nslurm_stop: {run.get('slurm_stop')}\n{cluster.logs(40)}"
    passed_on = r"workbench.sbatch: stop signal passed to the job's steps \(job (RUNNING|SIGNALING)\)"
    assert re.search(passed_on, output), why
    assert run["end_reason"] == "interrupted"
    stop = run["slurm_stop"]
    assert stop["reason"].startswith("time limit (--time): warned "), why
    assert stop["job_state"] in ("RUNNING", "SIGNALING"), why
    assert 0 < stop["time_left_s"] <= 60 + 30, why  # Slurm sends it up to 30 s early


@pytest.mark.slow
def test_a_missing_shared_data_dir_fails_in_the_job_before_training(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    missing = tmp_path / "not-mounted"
    job_id, code = _submit(
        cluster,
        "--cpus-per-task=1",
        f"--output={tmp_path / 'job-%j.out'}",
        _export(missing),
        str(SBATCH),
        wait=True,
    )
    assert code != 0
    lines = (tmp_path / f"job-{job_id}.out").read_text().splitlines()
    assert lines == [
        f"workbench.sbatch: error: DATA_DIR={missing}: no such directory (it should be on shared storage)"
    ]
    assert not missing.exists()


# ---- without a scheduler ------------------------------------------------------------------------


def _script(*args: str, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    return subprocess.run(
        ["bash", str(SBATCH), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={**env, "WORKBENCH_DIR": str(REPO), **variables},
    )


def test_an_unwritable_data_dir_is_one_line_and_nothing_starts() -> None:
    done = _script(DATA_DIR="/proc")
    assert done.returncode == 2
    assert done.stderr == "workbench.sbatch: error: DATA_DIR=/proc: cannot write there\n"
    assert done.stdout == ""


def test_what_each_node_runs(tmp_path: Path) -> None:
    done = _script(
        "--batch", "4", DRY_RUN="1", DATA_DIR=str(tmp_path), DEVICE="gpu", GPUS="2", DURATION="30m"
    )
    assert done.returncode == 0, done.stderr
    line = done.stdout
    assert line.startswith("srun --nodes=1 --ntasks=1 --ntasks-per-node=1 ")
    assert "collect\\ timed" in line
    workload = f"30m --device gpu --preset small --framework torch --data-dir {tmp_path} --gpus 2 --batch 4"
    assert workload in line


@pytest.mark.parametrize(("task", "device"), [("0", "cpu"), ("1", "gpu")])
def test_an_array_task_picks_its_node_type(tmp_path: Path, task: str, device: str) -> None:
    done = _script(DRY_RUN="1", DATA_DIR=str(tmp_path), SLURM_ARRAY_TASK_ID=task, NODE_TYPES="cpu gpu")
    assert done.returncode == 0, done.stderr
    assert f"--device {device} " in done.stdout


def test_an_array_task_beyond_the_node_types_is_one_line(tmp_path: Path) -> None:
    done = _script(DATA_DIR=str(tmp_path), SLURM_ARRAY_TASK_ID="2", NODE_TYPES="cpu gpu")
    assert done.returncode == 2
    assert done.stderr == "workbench.sbatch: error: array task 2: NODE_TYPES has only 2 entries (cpu gpu)\n"


def test_many_nodes_get_one_torchrun_each_meeting_on_the_first_node(tmp_path: Path) -> None:
    """Two nodes: every node's collect timed gets the nodes, node 0's address and the job as rendezvous, and
    its own node rank from Slurm (a real two-node training on one machine: test_training_multinode.py)."""
    nodes = {"SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_ID": "4711", "RDZV_HOST": "node07", "RDZV_PORT": "29511"}
    done = _script(DRY_RUN="1", DATA_DIR=str(tmp_path), **nodes)
    assert done.returncode == 0, done.stderr
    assert "--nnodes 2 --rdzv-endpoint node07:29511 --rdzv-id 4711" in done.stdout
    assert r"--node-rank\ \"\$SLURM_NODEID\"" in done.stdout  # quoted for the node's shell
    tf = _script(DRY_RUN="1", DATA_DIR=str(tmp_path), FRAMEWORK="tf", **nodes)
    assert tf.returncode == 2
    assert tf.stderr.startswith("workbench.sbatch: error: 2 nodes need FRAMEWORK=torch")


def test_help() -> None:
    done = _script("--help")
    assert done.returncode == 0 and "sbatch scripts/slurm/workbench.sbatch" in done.stdout


def test_a_missing_virtualenv_is_one_line(tmp_path: Path) -> None:
    done = _script(DATA_DIR=str(tmp_path), WORKBENCH_VENV=str(tmp_path / "no-venv"))
    assert done.returncode == 2
    assert done.stderr == (
        f"workbench.sbatch: error: no virtualenv at {tmp_path / 'no-venv'}: create it once with "
        f"./scripts/collect_cpu.sh 1m in {REPO} (or set WORKBENCH_DIR / WORKBENCH_VENV)\n"
    )
