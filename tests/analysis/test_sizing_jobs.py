"""A multi-node data-parallel training read as one job (sizing.analysis.jobs): node 0's step log, every node's
energy and GPUs summed, hardware priced node by node; a job with a node missing is not combined."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import schemacheck
from energyfixtures import FINE_INTERVAL_S, fine_gpu, multi_gpu
from sizingfixtures import (
    GPU_NAME,
    GPU_TRAIN_START,
    reference_cpu,
    repeat_of,
    telemetry_frame,
    with_info,
    write_run,
)

from dashboard import sizing_view
from sizing import Prices, ReportSettings, RunData, UsageError, build_report, load_runs, to_json
from sizing.analysis.jobs import gather_jobs
from sizing.analysis.scaling import scaling_series

REPO = Path(__file__).resolve().parents[2]
PRICES = Prices(gpu_price=1000.0, cpu_price=500.0)


def as_node(run: RunData, rank: int, nnodes: int = 2, rdzv_id: str = "4711") -> RunData:
    """The run as node `rank` of a multi-node training: run.json `nodes`, its own host; a node other than
    0 keeps only its telemetry (node 0 holds the step log, training.json and phases)."""
    step_log = "this run directory" if rank == 0 else f"node rank 0 of rendezvous {rdzv_id}"
    nodes = {"nnodes": nnodes, "node_rank": rank, "world_size": nnodes, "rdzv_endpoint": "node0:29500",
             "rdzv_id": rdzv_id, "step_log": step_log}  # fmt: skip
    meta = {**run.meta, "host": f"node{rank}", "nodes": nodes}
    if rank == 0:
        return replace(run, meta=meta)
    empty = run.training.iloc[0:0]
    return replace(
        run, meta=meta, training_info={}, evaluation={}, training=empty, phases=run.phases.iloc[0:0]
    )


def gpu_job(node1_gpu_w: float = 250.0, node1_cpu_w: float = 40.0) -> tuple[RunData, RunData]:
    """Node 0: the reference GPU run every 0.25 s (steady S+21.9 … S+39.9, 20 examples/s; 300 W board,
    50 W RAPL). Node 1: the same span with its own GPU and CPU draw."""
    return as_node(fine_gpu("job-node0"), 0), as_node(fine_gpu("job-node1", node1_gpu_w, node1_cpu_w), 1)


def report(*runs: RunData, prices: Prices = PRICES):
    return build_report(list(runs), ReportSettings(prices=prices))


def test_the_nodes_of_one_training_are_sized_as_one_job() -> None:
    node0, node1 = gpu_job()
    result = report(node1, node0)  # in any order
    (job,) = result.analyses
    assert job.run_id == "job-node0" and [r.run_id for r in result.runs] == ["job-node0"]
    assert job.throughput.examples_per_s == pytest.approx(20.0)  # node 0's step log: every rank's examples
    # (300 + 50) W on node 0 + (250 + 40) W on node 1 = 640 W; × 1,000 / 20 examples/s
    assert job.j_per_1k_examples == pytest.approx(640.0 * 1000 / 20, rel=1e-3)
    assert job.steady_energy.covers == "GPU board (NVML energy counter) + CPU package (RAPL)"
    # each node a host at $500 and a GPU at $1,000
    assert job.hardware_price.usd == pytest.approx(3000.0)
    assert job.hardware["gpus"] == [GPU_NAME, GPU_NAME] and job.hardware["hosts"] == ["node0", "node1"]
    assert job.hardware_name == f"2 nodes × {GPU_NAME}"
    assert any("data-parallel training 4711 sized as one job of 2 nodes (job-node0, job-node1)" in w
               for w in result.warnings)  # fmt: skip
    assert not [w for w in result.warnings if "others uncounted" in w or "sized as this node alone" in w]
    sensors = {t.sensor for t in job.thermal}
    assert {"node0 gpu0", "node1 gpu0"} <= sensors
    assert any(e.startswith("node1 (node1): ") for e in job.verdict.evidence)

    data = to_json(result)
    schemacheck.validate_report_json(data)
    (entry,) = data["runs"]
    assert entry["energy_j_per_1k_examples"] == pytest.approx(32000.0, rel=1e-3)
    assert entry["hardware"]["node_hardware"] == [GPU_NAME, GPU_NAME]
    sources = {s["source"] for s in data["sections"]["energy"][0]["steady"]["sources"]}
    assert {"node0 gpu0", "node1 gpu0", "node0 cpu", "node1 cpu"} <= sources


def test_a_node_that_recorded_part_of_the_job_leaves_the_job_energy_unmeasured() -> None:
    node0, node1 = gpu_job()
    late = node1.telemetry[node1.telemetry["time_unix"] >= GPU_TRAIN_START + 32.0]  # 40 % of 21.9 … 39.9
    (job,) = report(node0, replace(node1, telemetry=late)).analyses
    assert job.j_per_1k_examples is None and job.hardware_price.usd == pytest.approx(3000.0)
    assert "node1 gpu0 covers 4" in job.steady_energy.missing  # 7.9 s of 18: 44 %


def test_a_node_without_rapl_makes_the_job_gpu_board_only() -> None:
    node0, node1 = gpu_job()
    (job,) = report(node0, replace(node1, telemetry=node1.telemetry.drop(columns="cpu_energy_j"))).analyses
    assert job.steady_energy.is_partial
    assert job.steady_energy.cpu_missing.startswith("node1: no RAPL")
    assert job.j_per_1k_examples == pytest.approx((300.0 + 250.0) * 1000 / 20, rel=1e-3)


def test_a_cpu_job_sums_each_nodes_cpu_package() -> None:
    cpu = reference_cpu("cpu-node0")  # 1 example/s steady; RAPL 40 W
    node1 = reference_cpu("cpu-node1")
    node1 = replace(
        node1, telemetry=node1.telemetry.assign(cpu_energy_j=60.0 * np.arange(len(node1.telemetry)))
    )
    (job,) = report(as_node(cpu, 0), as_node(node1, 1), prices=Prices(cpu_price=500.0)).analyses
    assert job.kind == "cpu" and job.j_per_1k_examples == pytest.approx((40.0 + 60.0) * 1000, rel=1e-3)
    assert job.hardware_price.usd == pytest.approx(1000.0)
    assert job.hardware_name.startswith("2 nodes × ")


def test_a_job_is_never_a_repeat_of_a_one_node_run() -> None:
    """2 nodes × 1 GPU and 1 node × 2 GPUs: the same GPUs, not the same hardware."""
    two_gpus = multi_gpu("two-gpus", [95.0, 95.0], [300.0, 300.0], ["GPU-0", "GPU-1"])
    result = report(two_gpus, *gpu_job())
    assert two_gpus.meta["system"]["gpu_count"] == 2 and len(result.context.groups) == 2


@pytest.mark.parametrize(
    ("ranks", "says"),
    [((0,), "node 1 of 2 not given"), ((0, 1, 1), "node 1 given twice")],
)
def test_a_job_not_given_whole_is_sized_node_by_node_and_says_why(ranks: tuple[int, ...], says: str) -> None:
    runs = [as_node(repeat_of(fine_gpu(), f"part-{i}") if i > 1 else fine_gpu(f"part-{i}"), rank)
            for i, rank in enumerate(ranks)]  # fmt: skip
    result = report(*runs)
    assert [a.run_id for a in result.analyses] == [r.run_id for r in runs]  # each node alone
    expected = f"data-parallel training 4711: {says}: its runs are sized one node each"
    assert any(w.startswith(expected) for w in result.warnings), result.warnings
    assert any("others uncounted" in w for w in result.warnings)


def test_trainings_are_told_apart_by_their_rendezvous() -> None:
    node0, node1 = gpu_job()
    other0 = as_node(fine_gpu("other-node0"), 0, rdzv_id="4712")
    other1 = as_node(fine_gpu("other-node1"), 1, rdzv_id="4712")
    gathered, notes = gather_jobs([node0, other0, node1, other1])
    assert not notes and [g.nodes[0].run_id for g in gathered] == ["job-node0", "other-node0"]
    assert [r.run_id for r in gathered[1].nodes] == ["other-node0", "other-node1"]


JOB_IDS = ("20261123T213431Z-gpu-node00-job4711", "20261123T213431Z-gpu-node01-job4711")


def write_job(data_dir: Path) -> None:
    """The job's two run directories under data_dir/runs, with run ids as the Slurm template gives them."""
    for run, run_id in zip(gpu_job(), JOB_IDS, strict=True):
        write_run(data_dir / "runs", replace(run, run_id=run_id, meta={**run.meta, "run_id": run_id}))


def test_the_command_line_sizes_a_jobs_run_directories_as_one(tmp_path: Path) -> None:
    """As docs/fleet.md and the README show it: `python -m sizing data/runs/*-job4711 --out job.md`."""
    write_job(tmp_path / "data")
    shell = f"{sys.executable} -m sizing data/runs/*-job4711 --gpu-price 1000 --cpu-price 500 --out job.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        ["bash", "-c", shell], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    data = json.loads((tmp_path / "job.json").read_text())
    (entry,) = data["runs"]
    assert entry["run_id"] == JOB_IDS[0] and entry["hardware_price_usd"] == pytest.approx(3000.0)
    assert entry["energy_j_per_1k_examples"] == pytest.approx(32000.0, rel=1e-3)
    assert any("sized as one job of 2 nodes" in w for w in data["warnings"])


def test_the_dashboard_sizes_a_selected_jobs_runs_as_one(tmp_path: Path) -> None:
    write_job(tmp_path)
    built, notes = sizing_view.build(tmp_path, list(JOB_IDS), [s[2] for s in sizing_view.FIELDS])
    assert built is not None and not notes
    (job,) = built.analyses
    assert job.run_id == JOB_IDS[0] and job.hardware_name == f"2 nodes × {GPU_NAME}"
    assert job.j_per_1k_examples == pytest.approx(32000.0, rel=1e-3)


def test_a_job_is_not_a_point_of_a_one_node_scaling_series() -> None:
    one = with_info(fine_gpu("one-gpu"), world_size=1, per_device_batch_size=1)
    two = with_info(fine_gpu("two-gpus"), world_size=2, per_device_batch_size=1)
    alone = report(one, two)  # 1 → 2 GPUs on one host: a series
    assert len(scaling_series(alone.runs, alone.analyses, PRICES)) == 1
    node0 = as_node(two, 0)
    node0 = replace(node0, meta={**node0.meta, "host": one.meta["host"]})  # the same host as node 0
    together = report(one, node0, as_node(fine_gpu("two-node1"), 1))
    assert scaling_series(together.runs, together.analyses, PRICES) == []


def test_a_node_with_only_energy_counters_counts_its_mean_power() -> None:
    """Node 1 records counters only (no power columns): its mean power over the job's window counts."""
    node0, node1 = gpu_job()
    samples = len(node1.telemetry)
    busy = np.where(np.arange(samples) * FINE_INTERVAL_S < 5, 0.0, 90.0)  # idle before S: not shared
    telemetry = telemetry_frame(GPU_TRAIN_START - 5, samples, FINE_INTERVAL_S, gpu0_util_pct=busy,
                                gpu0_energy_j=100.0 * np.arange(samples) * FINE_INTERVAL_S,
                                cpu_energy_j=10.0 * np.arange(samples) * FINE_INTERVAL_S)  # fmt: skip
    (job,) = report(node0, replace(node1, telemetry=telemetry)).analyses
    assert job.j_per_1k_examples == pytest.approx((350.0 + 110.0) * 1000 / 20, rel=1e-3)


def test_two_nodes_on_one_host_may_share_a_run_id(tmp_path: Path) -> None:
    """Two "nodes" on one machine write the same run id into two data directories: one job; the same id
    twice for anything else is still refused."""
    same_id = "20261123T213431Z-cpu-vm"
    for rank, run in enumerate(gpu_job()):
        write_run(
            tmp_path / f"node{rank}", replace(run, run_id=same_id, meta={**run.meta, "run_id": same_id})
        )
    dirs = [str(tmp_path / f"node{rank}" / same_id) for rank in (0, 1)]
    (job,) = load_and_report(tmp_path, dirs)
    assert job.run_id == same_id and len(job.hardware["node_hardware"]) == 2
    plain = fine_gpu(same_id)
    write_run(tmp_path / "other", plain)
    with pytest.raises(UsageError, match="run given twice"):
        load_runs(tmp_path, [dirs[0], str(tmp_path / "other" / same_id)])
    with pytest.raises(UsageError, match="run given twice"):
        load_runs(tmp_path, [dirs[0], dirs[0]])


def load_and_report(data_dir: Path, specs: list[str]):
    return report(*load_runs(data_dir, specs)).analyses


def test_the_other_nodes_add_their_labels_and_stand_in_the_evidence() -> None:
    node0, node1 = gpu_job()
    before = node1.telemetry["time_unix"] < GPU_TRAIN_START  # idle before the training: not shared
    idle_hot = node1.telemetry.assign(
        gpu0_util_pct=np.where(before, 0.0, 30.0), gpu0_throttle_reasons=float(0x20)
    )
    (job,) = report(node0, replace(node1, telemetry=idle_hot)).analyses
    assert job.verdict.primary == "GPU underused"  # node 1, 65 points below node 0: the job's pace
    assert "thermally throttled" in job.verdict.labels and "node1: GPU underused" in job.verdict.labels
    assert "node0 (node0): GPU-bound" in job.verdict.evidence  # node 0's own verdict is evidence


def with_node1(util_pct: float, cpu_pct: float = 30.0) -> RunData:
    """gpu_job()'s node 1 with its GPU at util_pct and its CPU at cpu_pct through the training."""
    _, node1 = gpu_job()
    before = node1.telemetry["time_unix"] < GPU_TRAIN_START
    telemetry = node1.telemetry.assign(gpu0_util_pct=np.where(before, 0.0, util_pct), cpu_util_pct=cpu_pct)
    return replace(node1, telemetry=telemetry)


def test_a_straggling_host_bound_node_is_the_jobs_verdict_and_reaches_the_headline() -> None:
    """Node 1 waits on its host (CPU 95 %, its GPU at 40 %) while node 0's GPU reads 95 %."""
    node0, _ = gpu_job()
    result = report(reference_cpu(), node0, with_node1(40.0, cpu_pct=95.0))
    job = next(a for a in result.analyses if a.run_id == "job-node0")
    verdict = job.verdict
    assert verdict.primary == "host-bound"
    assert verdict.labels[:3] == ("host-bound", "straggler node: node1", "node1: host-bound")
    assert verdict.evidence[0] == (
        "node1 (node1) straggles: mean GPU util 40.0 %, 55.0 points below node0's 95.0 % (≥ 20): every "
        "node's step waits on it"
    )
    assert verdict.evidence[1].startswith("node1 (node1): host-bound (mean GPU util 40.0 %; mean CPU util")
    assert verdict.evidence[2] == "node0 (node0): GPU-bound"
    assert verdict.numbers["slowest node rank"] == 1 and verdict.numbers["gpu_util_pct"] == pytest.approx(40)
    assert job.headroom.limit == "from utilization only: host-bound"  # not node 0's GPU-bound
    assert "node1 (node1) straggles" in job.headroom.limit_evidence
    data = to_json(result)
    (comparison,) = data["comparisons"]
    assert comparison["gpu_waited_on"].startswith("the GPU run was host-bound (node1 (node1) straggles")
    assert any("host-bound" in line and "node1" in line for line in result.headline), result.headline


@pytest.mark.parametrize(("util", "straggles"), [(75.0, True), (75.5, False)])  # 20 points below 95 %
def test_the_straggler_node_threshold(util: float, straggles: bool) -> None:
    node0, _ = gpu_job()
    (job,) = report(node0, with_node1(util)).analyses
    assert ("straggler node: node1" in job.verdict.labels) is straggles
    assert job.verdict.numbers["node util gap pct"] == pytest.approx(95.0 - util)
    assert job.verdict.numbers["slowest node rank"] == 1  # the least busy node is the slowest either way
    assert any(e.startswith("node1 (node1) straggles") for e in job.verdict.evidence) is straggles


def test_a_host_bound_node_gives_the_cause_when_the_slowest_node_has_none() -> None:
    """Node 0's GPU at 70 % with no cause (undetermined), node 1 host-bound at 78 %: within the gap; node 0
    is the slowest, node 1's host-bound the job's verdict (GPU-bound nodes are never host-bound)."""
    node0, _ = gpu_job()
    before = node0.telemetry["time_unix"] < GPU_TRAIN_START
    node0 = replace(node0, telemetry=node0.telemetry.assign(gpu0_util_pct=np.where(before, 0.0, 70.0)))
    (job,) = report(node0, with_node1(78.0, cpu_pct=95.0)).analyses
    assert job.verdict.primary == "host-bound" and job.verdict.numbers["slowest node rank"] == 0
    assert "node1: host-bound" in job.verdict.labels and not any("straggler" in x for x in job.verdict.labels)
    assert job.verdict.evidence[0].startswith("node1 (node1): host-bound (mean GPU util 78.0 %")
    assert job.verdict.evidence[1].startswith("node0 (node0): undetermined")
    (alone,) = report(node0, with_node1(78.0)).analyses  # node 1 at 78 % with no cause either
    assert alone.verdict.primary == "undetermined" and alone.verdict.evidence[0].startswith("node0 (node0)")


def test_a_node_that_did_not_finish_makes_the_job_incomplete() -> None:
    node0, node1 = gpu_job()
    stopped = replace(node1, meta={**node1.meta, "end_reason": "interrupted", "exit_code": 130})
    result = report(node0, stopped)
    (job,) = result.analyses
    assert job.incomplete is not None and job.incomplete.startswith("node1 ")
    assert result.context.left_out == (job,)
