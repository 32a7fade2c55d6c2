"""Repeats grouped (same workload, device kind and hardware) and compared with a baseline group.

Everything is per 1,000 examples (images); steps only where the batch sizes match. A comparison across
workload signatures is kept but marked not like-for-like, with the differences listed; one with a workload
field unknown on either side is "not known to be like-for-like", with the unknown fields listed. Runs
with an unknown workload field are never grouped as repeats (unknown never equals unknown).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sizing.analysis import money, signature, speedup
from sizing.analysis.run import RunAnalysis
from sizing.analysis.runchecks import within_run_speedup_ci95
from sizing.analysis.stats import Spread, ratio_ci95, spread
from sizing.model import Prices


@dataclass(frozen=True)
class Group:
    """Repeats of one configuration."""

    analyses: tuple[RunAnalysis, ...]
    examples_per_s: Spread
    steps_per_s: Spread
    j_per_1k_examples: Spread
    energy_usd_per_1k: Spread
    hardware_usd_per_1k: Spread
    total_usd_per_1k: Spread

    @property
    def first(self) -> RunAnalysis:
        return self.analyses[0]

    @property
    def kind(self) -> str:
        return self.first.kind

    @property
    def run_ids(self) -> tuple[str, ...]:
        return tuple(a.run_id for a in self.analyses)

    @property
    def energy_is_estimate(self) -> bool:
        return any(a.energy_is_estimate for a in self.analyses)

    @property
    def name(self) -> str:
        return f"{self.kind.upper()} {self.first.hardware_name} · {self.first.workload_name}"

    @property
    def examples_unknown(self) -> str:
        """How the group's unknown examples/s reads: the first run's reason (steps not timed, …)."""
        return self.first.throughput.examples_unknown

    @property
    def machines(self) -> int | None:
        """How many different machines the repeats ran on (signature.machine_count); None: not recorded."""
        return signature.machine_count([a.hardware for a in self.analyses])


@dataclass(frozen=True)
class Comparison:
    group: Group
    is_baseline: bool
    like_for_like: bool
    differences: tuple[str, ...]
    batches_match: bool
    speedup: float | None
    speedup_ci95: tuple[float, float] | None
    energy_saving_per_gpu_hour: float | None
    break_even: money.BreakEven | None  # None for the baseline and for CPU groups

    @property
    def break_even_hours(self) -> float | None:
        return self.break_even.hours if self.break_even else None

    @property
    def break_even_is_estimate(self) -> bool:
        return bool(self.break_even and self.break_even.is_estimate)

    unknown_fields: tuple[str, ...] = ()  # workload fields unknown on either side
    within_run_ci95: tuple[float, float] | None = None  # speedup from batch means, one run per side
    interval: speedup.SpeedupInterval | None = None  # the interval the speedup is given with
    repeats_disagree: tuple[str, ...] = ()  # this group's and the baseline's, where their runs disagree
    in_steps: bool = False  # the speedup is of steps/s: examples per step not known on either side
    baseline: Group | None = None  # what the speedup is against


def group_key(a: RunAnalysis) -> tuple:
    if signature.unknown_fields(a.workload) or signature.hardware_unknown(a.kind, a.hardware):
        return ("workload or hardware not fully known", a.run_id)
    return (signature.workload_key(a.workload), signature.hardware_key(a.kind, a.hardware))


def make_group(analyses: Sequence[RunAnalysis]) -> Group:
    return Group(
        tuple(analyses),
        spread(a.throughput.examples_per_s for a in analyses),
        spread(a.throughput.steps_per_s for a in analyses),
        spread(a.j_per_1k_examples for a in analyses),
        spread(a.energy_usd_per_1k_examples for a in analyses),
        spread(a.hardware_usd_per_1k_examples for a in analyses),
        spread(a.total_usd_per_1k_examples for a in analyses),
    )


def group_runs(analyses: Sequence[RunAnalysis]) -> list[Group]:
    """Repeats together, in first-seen order."""
    found: dict[tuple, list[RunAnalysis]] = {}
    for a in analyses:
        found.setdefault(group_key(a), []).append(a)
    return [make_group(g) for g in found.values()]


def pick_baseline(groups: Sequence[Group], baseline_run_id: str | None = None) -> Group | None:
    """The named run's group; else the CPU group sharing its workload with the most GPU groups (a
    like-for-like pair), the fastest of those tied (a speedup against a slower CPU would flatter the GPU),
    else the first CPU group, else the first group."""
    if not groups:
        return None
    if baseline_run_id is not None:
        return next((g for g in groups if baseline_run_id in g.run_ids), None)
    cpu = [g for g in groups if g.kind == "cpu"]
    if not cpu:
        return groups[0]
    gpu_workloads = [g.first.workload for g in groups if g.kind == "gpu"]

    def pairs_then_speed(g: Group) -> tuple[int, float, float]:
        pairs = sum(signature.like_for_like(w, g.first.workload) for w in gpu_workloads)
        return (pairs, *speed(g)) if pairs else (0, 0.0, 0.0)

    return max(cpu, key=pairs_then_speed)


def speed(group: Group) -> tuple[float, float]:
    """(examples/s, steps/s), unknown as 0: the faster of two baselines, a job that counts steps only too."""
    return group.examples_per_s.mean or 0.0, group.steps_per_s.mean or 0.0


def steps_only(group: Group) -> bool:
    """Steps/s known, examples/s not (a job that says neither its batch nor its examples)."""
    return group.examples_per_s.mean is None and bool(group.steps_per_s.mean)


def compare(groups: Sequence[Group], baseline: Group | None, prices: Prices) -> list[Comparison]:
    found = []
    for g in groups:
        if baseline is None:
            found.append(Comparison(g, False, False, (), False, None, None, None, None))
            continue
        is_base = g is baseline
        diffs = tuple(signature.differences(g.first.workload, baseline.first.workload))
        unknown = tuple(signature.unknown_fields(g.first.workload, baseline.first.workload))
        batch, base_batch = g.first.workload.get("batch_size"), baseline.first.workload.get("batch_size")
        factor = None
        if g.examples_per_s.mean and baseline.examples_per_s.mean:
            factor = g.examples_per_s.mean / baseline.examples_per_s.mean
        in_steps = factor is None and not diffs and not unknown and steps_only(g) and steps_only(baseline)
        if in_steps:  # the same job, examples per step not known on either side: steps/s compare
            factor = g.steps_per_s.mean / baseline.steps_per_s.mean
        rates = (g.examples_per_s, baseline.examples_per_s)
        if in_steps:
            rates = (g.steps_per_s, baseline.steps_per_s)
        saving, even = None, None
        if g.kind == "gpu" and not is_base:
            saving = money.energy_saving_per_gpu_hour(
                g.examples_per_s.mean, g.energy_usd_per_1k.mean, baseline.energy_usd_per_1k.mean
            )
            estimate = saving is not None and (g.energy_is_estimate or baseline.energy_is_estimate)
            even = money.break_even(factor, g.first.hardware_price, baseline.first.hardware_price,
                                    baseline.kind, saving, prices, estimate)  # fmt: skip
        found.append(
            Comparison(
                group=g,
                is_baseline=is_base,
                like_for_like=not diffs and not unknown,
                differences=diffs,
                batches_match=batch is not None and batch == base_batch,
                speedup=factor,
                speedup_ci95=None if is_base else ratio_ci95(*rates),
                energy_saving_per_gpu_hour=saving,
                break_even=even,
                unknown_fields=unknown,
                within_run_ci95=None
                if is_base
                else within_run_speedup_ci95(
                    [a.throughput for a in g.analyses], [a.throughput for a in baseline.analyses], in_steps
                ),
                interval=None if is_base else speedup.speedup_interval(g.analyses, baseline.analyses),
                in_steps=in_steps and not is_base,
                baseline=baseline,
                repeats_disagree=tuple(
                    d for d in dict.fromkeys(speedup.repeats_disagree(x.analyses) for x in (g, baseline)) if d
                ),
            )
        )
    return found


def own_baselines(
    groups: Sequence[Group], baseline: Group | None, comparisons: Sequence[Comparison], prices: Prices
) -> dict[tuple[str, ...], Comparison]:
    """For each GPU group the baseline does not train like for like: its comparison against the fastest
    other CPU group that does (its own workload's baseline), keyed by the GPU group's run ids; none where no
    CPU group of the report trains its workload."""
    found = {}
    others = [g for g in groups if g.kind == "cpu" and g is not baseline]
    for c in comparisons:
        if c.group.kind != "gpu" or c.is_baseline or c.like_for_like:
            continue
        own = [g for g in others if signature.like_for_like(c.group.first.workload, g.first.workload)]
        if own:
            best = max(own, key=speed)
            against = compare([c.group, best], best, prices)
            found[c.group.run_ids] = next(x for x in against if not x.is_baseline)
    return found
