"""Multi-node data parallel, as far as one machine allows: two `collect timed` "nodes" (one torchrun each,
one rank per node) meet at a rendezvous on 127.0.0.1 and train one model together; and the refusals of
bad node options, one line and exit 2 before anything starts."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from trainfixtures import REPO, training_env

from runformat import read_json


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _timed(data_dir: Path, *options: str) -> list[str]:
    return [sys.executable, "-m", "collect", "timed", "20s", "--data-dir", str(data_dir), *options]


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--framework", "torch", "--nnodes", "2"], "--nnodes 2 needs --rdzv-endpoint HOST:PORT"),
        (
            ["--framework", "torch", "--nnodes", "2", "--node-rank", "2", "--rdzv-endpoint", "h:29500"],
            "--node-rank 2: expected 0..1",
        ),
        (["--nnodes", "2", "--rdzv-endpoint", "h:29500"], "is for --framework torch"),
        (["--framework", "torch", "--nnodes", "2", "--rdzv-endpoint", "h"], "expected HOST:PORT"),
        (["--framework", "torch", "--rdzv-endpoint", "h:29500"], "is for --nnodes N > 1"),
        (
            ["--framework", "torch", "--procs", "1,2", "--nnodes", "2", "--rdzv-endpoint", "h:1"],
            "a sweep (a list of counts) runs on one node",
        ),
    ],
)
def test_bad_node_options_are_refused_before_anything_starts(
    tmp_path: Path, options: list[str], says: str
) -> None:
    for command in (
        _timed(tmp_path, *options),
        [sys.executable, "-m", "training", "train", "--run-dir", str(tmp_path / "run"), *options],
    ):
        if "--procs" in options and command[3] == "train":
            continue  # a list of counts is refused by train's own --procs type
        done = subprocess.run(
            command, cwd=REPO, env=training_env(), capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 2, done.stderr
        assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "runs").exists() and not (tmp_path / "run").exists()


def test_torchrun_gets_the_nodes_and_rendezvous() -> None:
    from runformat.multinode import Nodes
    from training.distributed import launch_command

    command = launch_command(2, ["--x"], python="py", nodes=Nodes(3, 1, "head:29500", "77"))
    assert command[:3] == ["py", "-m", "torch.distributed.run"]
    text = " ".join(command)
    assert "--nnodes 3 --node-rank 1 --rdzv-backend static --rdzv-endpoint head:29500 --rdzv-id 77" in text
    assert "--standalone" not in text and text.endswith("--nproc_per_node 2 -m training --x")
    assert "--standalone" in launch_command(2, [], nodes=Nodes())


def test_the_rendezvous_id_defaults_to_the_slurm_job() -> None:
    import argparse

    from runformat.multinode import add_node_options, nodes_from_args

    parser = argparse.ArgumentParser()
    add_node_options(parser)
    args = parser.parse_args(["--nnodes", "2"])
    assert nodes_from_args(args, {"SLURM_JOB_ID": "4242"}).rdzv_id == "4242"
    assert nodes_from_args(parser.parse_args(["--rdzv-id", "x"]), {"SLURM_JOB_ID": "4242"}).rdzv_id == "x"


@pytest.mark.slow
def test_two_nodes_train_together_and_node_0_holds_the_step_log(tiny_dataset: Path, tmp_path: Path) -> None:
    endpoint = f"127.0.0.1:{_free_port()}"
    nodes = []
    for rank in (0, 1):
        command = _timed(
            tmp_path / f"node{rank}",
            "--framework", "torch", "--procs", "1", "--batch", "1", "--preset", "small", "--no-export",
            "--dataset", str(tiny_dataset), "--max-steps", "2",  # not the budget: 20 s of two ranks' CPU
            "--nnodes", "2", "--node-rank", str(rank), "--rdzv-endpoint", endpoint, "--rdzv-id", "job7",
        )  # fmt: skip
        (tmp_path / f"node{rank}").mkdir()
        nodes.append(
            subprocess.Popen(
                command,
                cwd=REPO,
                env=training_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outputs = [node.communicate(timeout=400)[0] for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], "\n".join(outputs)[-4000:]

    run0, run1 = (next((tmp_path / f"node{rank}" / "runs").iterdir()) for rank in (0, 1))
    training = read_json(run0 / "training.json")
    assert training["world_size"] == 2 and training["batch_size"] == 2
    assert training["nnodes"] == 2 and training["node_rank"] == 0 and training["rdzv_id"] == "job7"
    assert training["rdzv_endpoint"] == endpoint and training["steps"] == 2
    assert (run0 / "training.csv").is_file() and any((run0 / "checkpoints").iterdir())

    for run_dir, rank in ((run0, 0), (run1, 1)):
        record = read_json(run_dir / "run.json")
        assert record["end_reason"] == "completed" and record["exit_code"] == 0
        assert record["nodes"]["node_rank"] == rank and record["nodes"]["world_size"] == 2
        assert (run_dir / "telemetry.csv").is_file()
    assert not (run1 / "training.csv").exists() and not (run1 / "training.json").exists()
    assert read_json(run1 / "run.json")["nodes"]["step_log"] == "node rank 0 of rendezvous job7"
    assert "the step log, training.json and checkpoints are in the run of node 0" in outputs[1]
    assert (
        "node 1 of 2: training.csv, training.json and the checkpoints are in node 0's run directory"
        in (run1 / "command.log").read_text()
    )

    from sizing.cli import main as sizing_main

    # both "nodes" on this one host wrote the same run id, each into its own data directory
    assert sizing_main([str(run1), str(run0), "--cpu-tdp-w", "65", "--out", str(tmp_path / "job.json")]) == 0
    report = read_json(tmp_path / "job.json")
    (job,) = report["runs"]  # the two nodes' run directories read as one job, under node 0's run
    assert job["run_id"] == run0.name and len(job["hardware"]["node_hardware"]) == 2
    assert job["steps_per_s"] and job["energy_j_per_1k_examples"]
    sources = {s["source"] for s in report["sections"]["energy"][0]["steady"]["sources"]}
    assert {"node0 cpu", "node1 cpu"} <= sources
    assert any("data-parallel training job7 sized as one job of 2 nodes" in w for w in report["warnings"])
