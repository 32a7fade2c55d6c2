"""A multi-node job's energy: every node's Energy over the job's window, summed into one Energy.

Each node's sources are renamed by node (`node1 gpu0`, `node1 cpu`) and put on the job's window: a node
whose own window (the job's steady state clipped to its own recording, on its own clock) is shorter
covers only that part of the job's, so a node that recorded 40 % of the job is "covers 40 % of the run",
never extrapolated. The job's GPU board energy needs every node's charged GPUs; its CPU package energy
needs every node's CPU, else the job's figure is the GPU board only (or, for a CPU job, not measured).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sizing.analysis.coverage import SourceEnergy
from sizing.analysis.energy import Energy, gpu_name


def node_name(rank: int) -> str:
    return f"node{rank}"


def _on_job_window(
    source: SourceEnergy, rank: int, window_s: float, method_too: bool = False
) -> SourceEnergy:
    """The node's source, named by node, its covered time measured against the job's window."""
    named = f"{node_name(rank)} {source.source}"
    method = f"{node_name(rank)} {source.method}" if method_too else source.method
    return replace(source, source=named, method=method, window_s=window_s)


def _job_cpu(nodes: Sequence[tuple[int, Energy | None]], window_s: float) -> tuple[SourceEnergy | None, str]:
    """Every node's CPU package summed (mean powers added) when each is complete on the job's window;
    else the first node's incomplete source or why it has none."""
    chosen = []
    for rank, energy in nodes:
        cpu = energy.cpu if energy is not None else None
        if cpu is None:
            reason = energy.cpu_missing_reason if energy is not None else "no telemetry in the window"
            return None, f"{node_name(rank)}: {reason}"
        on_job = _on_job_window(cpu, rank, window_s, method_too=True)
        if not on_job.complete or on_job.mean_w is None:
            return on_job, ""
        chosen.append(on_job)
    covered_s = min(s.covered_s for s in chosen)
    methods = sorted({s.method.split(" ", 1)[1] for s in chosen})
    summed = SourceEnergy(
        source="cpu",
        method=" + ".join(methods),
        joules=sum(s.mean_w or 0.0 for s in chosen) * covered_s,
        covered_s=covered_s,
        window_s=window_s,
        resets=sum(s.resets for s in chosen),
        is_estimate=any(s.is_estimate for s in chosen),
    )
    return summed, ""


def job_energy(
    nodes: Sequence[tuple[int, Energy | None]], window_s: float | None, is_gpu_run: bool
) -> Energy | None:
    """The job's energy over its window (node 0's): `nodes` is each node's rank and Energy (None when
    it has no telemetry in the window); None when the job has no window or no node any energy."""
    if not window_s or window_s <= 0 or all(energy is None for _, energy in nodes):
        return None
    gpus: list[tuple[int | str, SourceEnergy | None]] = []
    idle: list[tuple[int | str, float | None]] = []
    checks, considered = [], []
    for rank, energy in nodes:
        if energy is None or (is_gpu_run and not energy.gpus):
            gpus.append((f"{node_name(rank)} GPUs", None))
        if energy is None:
            continue
        for index, source in energy.gpus:
            on_job = _on_job_window(source, rank, window_s) if source is not None else None
            gpus.append((f"{node_name(rank)} {gpu_name(index)}", on_job))
        idle += [(f"{node_name(rank)} {gpu_name(index)}", w) for index, w in energy.idle_gpus_w]
        checks += [f"{node_name(rank)}: {check}" for check in energy.checks]
        considered += [_on_job_window(s, rank, window_s) for s in energy.considered]
    cpu, cpu_reason = _job_cpu(nodes, window_s)
    unattributed = dict.fromkeys(e.not_attributable for _, e in nodes if e is not None and e.not_attributable)
    return Energy(
        window_s=window_s,
        is_gpu_run=is_gpu_run,
        gpus=tuple(gpus),
        cpu=cpu,
        cpu_missing_reason=cpu_reason,
        idle_gpus_w=tuple(idle),
        checks=tuple(checks),
        considered=tuple(considered),
        not_attributable="; ".join(unattributed),  # a node's shared GPU or MIG slice: the job's is unknown
    )
