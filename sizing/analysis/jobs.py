"""A multi-node data-parallel training read as one job: its nodes' run directories together.

`collect timed --nnodes N` (scripts/slurm/workbench.sbatch with `--nodes=N`) leaves one run directory per
node, run.json `nodes` saying which: node 0's holds the step log (every rank's examples), every node's
its own telemetry. Runs given together that share `nodes.rdzv_id`, `rdzv_endpoint` and `nnodes`, one per
node rank 0..N−1, are sized as one job under node 0's run id: throughput from node 0's training.csv;
each node's energy, temperatures, throttling and verdict over the job's windows (node 0's steady state
and training window in unix time, clipped to the node's own `train` phase and recording, on its own
clock); energy, GPUs and hardware prices summed over the nodes (sizing.analysis.node_energy); the verdict the
slowest node's, a straggling node named, every node that waited on its host or a stall a label. A job
with a node missing or a node rank given twice is not combined: each of its runs is sized alone, and
the report says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from sizing.analysis import money, runchecks
from sizing.analysis.bottleneck import GPU_UNDERUSED, HOST_BOUND, IO_BOUND, Verdict
from sizing.analysis.gpu_state import state_warnings
from sizing.analysis.gpu_verdicts import BUSY_NOT_COMPUTING, STRAGGLER
from sizing.analysis.headroom import FROM_UTILIZATION, Headroom
from sizing.analysis.node_energy import job_energy, node_name
from sizing.analysis.run import RunAnalysis, analyse_run, cost_figures, energy_warnings, run_windows
from sizing.model import Prices, RunData, Thresholds, number

JobKey = tuple[str, str, int]  # rdzv_id, rdzv_endpoint, nnodes
NODE_STRAGGLER_GAP_PCT = 20.0  # points of mean GPU utilization below the job's busiest node
NODE_WAITED = (HOST_BOUND, IO_BOUND, GPU_UNDERUSED, BUSY_NOT_COMPUTING)
STRAGGLER_NODE = "straggler node"


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


def _util_pct(a: RunAnalysis) -> float | None:
    return a.verdict.numbers.get("gpu_util_pct") if a.kind == "gpu" else None


def slowest_node(parts: Sequence[RunAnalysis]) -> tuple[int, float | None, int]:
    """The node that sets a GPU job's pace, the gap in points between it and the busiest node, and the
    busiest: the least busy by mean utilization of its least busy GPU (a node waiting on its host reads
    low while the others spin in the collective waiting for it, which NVML counts as busy); node 0 with
    no gap when fewer than two nodes' utilization is known (a CPU job: a waiting CPU may read busy)."""
    known = [(u, k) for k, a in enumerate(parts) if (u := _util_pct(a)) is not None]
    if len(known) < 2:
        return 0, None, 0
    low, slow = min(known)
    high, fast = min((-u, k) for u, k in known)
    return slow, -high - low, fast


def _waited(primary: str) -> bool:
    """A verdict that says the node waited (on its host, its storage, a collective, a straggling GPU)."""
    return primary in NODE_WAITED or primary.startswith(STRAGGLER)


def _verdict(parts: Sequence[RunAnalysis]) -> tuple[Verdict, int]:
    """The job's verdict is its slowest node's (sections.definitions: Multi-node job): that node's primary
    verdict and evidence (when it names no cause, those of the least busy node that waited on its host,
    its storage or a stall); a straggler label naming it when it is ≥ NODE_STRAGGLER_GAP_PCT points
    below the busiest node; a "nodeK: verdict" label for every node that waited; the labels the other
    nodes add; each other node's verdict among the evidence. And the node whose verdict it is."""
    slow, gap, fast = slowest_node(parts)
    judged = slow
    if not _waited(parts[slow].verdict.primary):  # the slowest has no cause: a node that waited gives one
        waiting = [k for k, a in enumerate(parts) if _waited(a.verdict.primary)]
        judged = min(
            waiting, key=lambda k: (_util_pct(parts[k]) is None, _util_pct(parts[k]) or 0.0, k), default=slow
        )
    head = parts[judged].verdict

    def where(k: int) -> str:
        return f"{node_name(k)} ({parts[k].hardware.get('host')})"

    lead = []
    if gap is not None and gap >= NODE_STRAGGLER_GAP_PCT:
        lead.append(
            f"{where(slow)} straggles: mean GPU util {_util_pct(parts[slow]):.1f} %, {gap:.1f} points below "
            f"{node_name(fast)}'s {_util_pct(parts[fast]):.1f} % (≥ {NODE_STRAGGLER_GAP_PCT:g}): every "
            "node's step waits on it"
        )
    waited = [
        f"{node_name(k)}: {a.verdict.primary}" for k, a in enumerate(parts) if _waited(a.verdict.primary)
    ]
    straggler = [f"{STRAGGLER_NODE}: {node_name(slow)}"] if lead else []
    added = (label for a in parts for label in a.verdict.labels[1:])
    labels = tuple(dict.fromkeys((head.primary, *straggler, *waited, *head.labels[1:], *added)))
    slowest = f"{where(judged)}: {head.primary}" + (f" ({'; '.join(head.evidence)})" if head.evidence else "")
    others = []
    for k, a in enumerate(parts):
        if k != judged:
            why = (
                f" ({'; '.join(a.verdict.evidence)})"
                if _waited(a.verdict.primary) and a.verdict.evidence
                else ""
            )
            others.append(f"{where(k)}: {a.verdict.primary}{why}")
    numbers = {**head.numbers, "slowest node rank": float(slow), "node util gap pct": gap}
    return replace(head, labels=labels, evidence=(*lead, slowest, *others), numbers=numbers), judged


def _headroom(parts: Sequence[RunAnalysis], judged: int, verdict: Verdict) -> Headroom | None:
    """Node 0's MFU (its step log counts every rank, its peak every GPU) with why the GPU is not at its
    limit from the node the verdict is (its counters, else the job's utilization verdict)."""
    head, node = parts[0].headroom, parts[judged].headroom
    if head is None or node is None or node.limit is None:
        return head
    if node.limit.startswith(FROM_UTILIZATION) and not node.limit_from_counters:
        why = "; ".join(verdict.evidence) or "no rule matched"
        evidence = f"no GPU profiling counters (GPM) in the window; the utilization verdict: {why}"
        return replace(head, limit=f"{FROM_UTILIZATION}: {verdict.primary}", limit_from_counters=False,
                       limit_evidence=evidence, numbers=node.numbers)  # fmt: skip
    evidence = f"{node_name(judged)}: {node.limit_evidence}" if len(parts) > 1 else node.limit_evidence
    return replace(head, limit=node.limit, limit_from_counters=node.limit_from_counters,
                   limit_evidence=evidence, numbers=node.numbers)  # fmt: skip


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
    verdict, judged = _verdict(parts)
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
        verdict=verdict,
        headroom=_headroom(parts, judged, verdict),
        warnings=tuple(dict.fromkeys(warnings)),
        incomplete=head.incomplete or (stopped[0] if stopped else None),
    )
