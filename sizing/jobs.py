"""A multi-node data-parallel training read as one job: its nodes' run directories together.

`collect timed --nnodes N` (scripts/slurm/workbench.sbatch with `--nodes=N`) leaves one run directory per
node, run.json `nodes` saying which: node 0's holds the step log (every rank's examples), every node's
its own telemetry. Runs given together that share `nodes.rdzv_id`, `rdzv_endpoint` and `nnodes`, one per
node rank 0..N−1, are sized as one job under node 0's run id: throughput from node 0's training.csv;
each node's energy, temperatures, throttling and verdict over the job's windows (node 0's steady state
and training window in unix time, clipped to the node's own `train` phase and recording, on its own
clock); energy, GPUs and hardware prices summed over the nodes (sizing.node_energy). A job with a node
missing or a node rank given twice is not combined: each of its runs is sized alone, and the report
says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from sizing import money, runchecks
from sizing.analysis import RunAnalysis, analyse_run, cost_figures, energy_warnings, run_windows
from sizing.bottleneck import Verdict
from sizing.gpu_state import state_warnings
from sizing.model import Prices, RunData, Thresholds, number
from sizing.node_energy import job_energy, node_name

JobKey = tuple[str, str, int]  # rdzv_id, rdzv_endpoint, nnodes


@dataclass(frozen=True)
class Job:
    rdzv_id: str
    nodes: tuple[RunData, ...]  # by node rank: nodes[0] holds the step log


def node_place(run: RunData) -> tuple[JobKey, int] | None:
    """Which training and node rank a run is, from run.json `nodes`; None for a one-node run."""
    nodes = run.meta.get("nodes")
    if not isinstance(nodes, dict):
        return None
    count, rank = number(nodes.get("nnodes")), number(nodes.get("node_rank"))
    if count is None or count <= 1 or rank is None or rank != int(rank) or count != int(count):
        return None
    return (str(nodes.get("rdzv_id")), str(nodes.get("rdzv_endpoint")), int(count)), int(rank)


def _why_not_whole(key: JobKey, ranks: list[int]) -> str:
    missing = [r for r in range(key[2]) if r not in ranks]
    twice = sorted({r for r in ranks if ranks.count(r) > 1})
    outside = sorted({r for r in ranks if not 0 <= r < key[2]})
    parts = [f"node {', '.join(map(str, missing))} of {key[2]} not given"] if missing else []
    parts += [f"node {', '.join(map(str, twice))} given twice"] if twice else []
    parts += [f"node rank {', '.join(map(str, outside))} outside 0..{key[2] - 1}"] if outside else []
    return "; ".join(parts)


def gather_jobs(runs: Sequence[RunData]) -> tuple[list[RunData | Job], list[str]]:
    """The runs in the order given, each whole multi-node job as one Job at its first node's place, and
    one line per job that cannot be read as one (its runs then stay runs of their own)."""
    members: dict[JobKey, list[tuple[int, RunData]]] = {}
    for run in runs:
        if (place := node_place(run)) is not None:
            members.setdefault(place[0], []).append((place[1], run))
    jobs, notes = {}, []
    for key, found in members.items():
        ranks = [rank for rank, _ in found]
        if sorted(ranks) == list(range(key[2])):
            jobs[key] = Job(key[0], tuple(run for _, run in sorted(found, key=lambda m: m[0])))
        else:
            notes.append(
                f"data-parallel training {key[0]}: {_why_not_whole(key, ranks)}: its runs are sized one "
                "node each (give every node's run once to size the training as one job)"
            )
    gathered: list[RunData | Job] = []
    for run in runs:
        place = node_place(run)
        if place is None or place[0] not in jobs:
            gathered.append(run)
        elif jobs[place[0]].nodes[0] is run:
            gathered.append(jobs[place[0]])
    return gathered, notes


def _on_the_step_log(run: RunData, head: RunData) -> RunData:
    """Another node's run with node 0's step log and training.json (minus its GPUs: each node charges
    its own), and node 0's phases where it has none of its own."""
    info = {k: v for k, v in head.training_info.items() if k not in ("gpu_uuids", "gpu_names")}
    phases = run.phases if not run.phases.empty else head.phases
    return replace(run, training=head.training, training_info=info, phases=phases)


def _price(prices: Sequence[money.HardwarePrice]) -> money.HardwarePrice:
    hosts = [p.host_usd for p in prices]
    gpus = [p.gpu_usd for p in prices]
    return money.HardwarePrice(
        None if None in hosts else sum(h or 0.0 for h in hosts),
        None if None in gpus else sum(g or 0.0 for g in gpus),
        tuple(u for p in prices for u in p.unpriced),
    )


def _verdict(parts: Sequence[RunAnalysis]) -> Verdict:
    """Node 0's verdict with the labels the other nodes add (thermally throttled, …; not their own
    primary verdicts), and each other node's verdict among the evidence."""
    head = parts[0].verdict
    added = (label for a in parts[1:] for label in a.verdict.labels[1:])
    labels = tuple(dict.fromkeys((*head.labels, *added)))
    others = tuple(f"{node_name(k)} ({a.hardware.get('host')}): {a.verdict.primary}"
                   for k, a in enumerate(parts) if k)  # fmt: skip
    return replace(head, labels=labels, evidence=(*head.evidence, *others))


def _hardware(parts: Sequence[RunAnalysis]) -> dict:
    hw = dict(parts[0].hardware)
    hw["gpus"] = [name for a in parts for name in a.hardware.get("gpus") or []]
    hw["gpu_uuids"] = [uuid for a in parts for uuid in a.hardware.get("gpu_uuids") or []]
    hw["node_hardware"] = [a.hardware_name for a in parts]
    hw["hosts"] = [a.hardware.get("host") for a in parts]
    return hw


def _node_warnings(rank: int, run: RunData, part: RunAnalysis) -> list[str]:
    """What another node's run adds: its reading problems and its GPU attribution (its energy's gaps
    are the job's, said once)."""
    found = list(run.warnings)
    if not part.gpu_attribution_known:
        found.append(f"{run.run_id}: energy charged for {part.gpu_attribution} of {node_name(rank)}")
    return found


def analyse_job(job: Job, prices: Prices, thresholds: Thresholds) -> RunAnalysis:
    """The job as one run under node 0's run id (see the module's docstring)."""
    head_run = job.nodes[0]
    head = analyse_run(head_run, prices, thresholds, head_of_job=True)
    others = [_on_the_step_log(run, head_run) for run in job.nodes[1:]]
    parts = [head, *(analyse_run(run, prices, thresholds, head_of_job=True) for run in others)]
    steady_window = head.steady_energy.window_s if head.steady_energy else None
    training_window, _ = run_windows(head_run, head.throughput)
    training_s = training_window[1] - training_window[0] if training_window else None
    is_gpu = head.kind == "gpu"
    steady = job_energy([(k, a.steady_energy) for k, a in enumerate(parts)], steady_window, is_gpu)
    training = job_energy([(k, a.training_energy) for k, a in enumerate(parts)], training_s, is_gpu)
    nodes = list(enumerate(parts))
    price = _price([a.hardware_price for a in parts])
    ids = ", ".join(run.run_id for run in job.nodes)
    node0_energy = set(energy_warnings(head.run_id, head.kind, head.steady_energy))
    warnings = [
        f"{head.run_id}: data-parallel training {job.rdzv_id} sized as one job of {len(parts)} nodes "
        f"({ids}): throughput from node 0's step log; energy, GPUs and hardware summed over the nodes",
        *(w for w in head.warnings if w not in node0_energy),
        *energy_warnings(head.run_id, head.kind, steady),
    ]
    for rank, (run, part) in enumerate(zip(job.nodes[1:], parts[1:], strict=True), start=1):
        warnings += _node_warnings(rank, run, part) + state_warnings(run.run_id, part.gpu_state)
    stopped = [f"{node_name(k)} {why}" for k, run in enumerate(job.nodes[1:], start=1)
               if (why := runchecks.incomplete_reason(run.meta, {}))]  # fmt: skip
    return replace(
        head,
        hardware=_hardware(parts),
        gpu_attribution="; ".join(f"{node_name(k)}: {a.gpu_attribution}" for k, a in enumerate(parts)),
        gpu_attribution_known=all(a.gpu_attribution_known for a in parts),
        steady_energy=steady,
        training_energy=training,
        **cost_figures(steady, head.throughput, price, prices),
        thermal=tuple(replace(t, sensor=f"{node_name(k)} {t.sensor}") for k, a in nodes for t in a.thermal),
        throttling=tuple(
            replace(t, source=f"{node_name(k)} {t.source}") for k, a in nodes for t in a.throttling
        ),
        verdict=_verdict(parts),
        warnings=tuple(dict.fromkeys(warnings)),
        incomplete=head.incomplete or (stopped[0] if stopped else None),
    )
