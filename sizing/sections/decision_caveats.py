"""The Decision's caveats: what could make its lines wrong, unsure or partial, each with its weight
(sizing.sections.definitions "Decision")."""

from __future__ import annotations

from collections.abc import Sequence

from sizing.analysis import concurrency, signature
from sizing.analysis import speedup as sp
from sizing.analysis import tuning as tn
from sizing.analysis.compare import Comparison, Group
from sizing.analysis.run import RunAnalysis
from sizing.analysis.validity import (
    gpu_held_down,
    gpu_host_contended,
    gpu_idle,
    group_weak_reasons,
    rate_doubts,
)
from sizing.context import ReportContext
from sizing.sections import tuning as tuned_text

# A caveat's weight: what makes the figure wrong, then what makes it unsure, then what leaves it partial.
INVALIDATES, UNSURE, PARTIAL = 0, 1, 2
NO_CPU_RUN = "No CPU run to compare the GPU with"


def no_cpu_group(ctx: ReportContext) -> bool:
    """The baseline is a GPU group and the report holds no (complete) CPU group to be one."""
    base = ctx.baseline
    return base is not None and base.kind == "gpu" and not any(g.kind == "cpu" for g in ctx.groups)


def gpu_options(ctx: ReportContext) -> list[Comparison]:
    found = [c for c in ctx.comparisons if not c.is_baseline and c.group.kind == "gpu"]
    return sorted(found, key=lambda c: not _same_work(c, ctx))  # like-for-like first, else as grouped


def _same_work(c: Comparison, ctx: ReportContext) -> bool:
    """Like-for-like, or a tuned pair whose workloads differ only in what a sweep may change."""
    pair = None if c.like_for_like else ctx.tuned_pair(c)
    return c.like_for_like or bool(pair and pair.same_task)


def _not_the_same_work(options: Sequence[Comparison]) -> str:
    """No option trains the baseline's workload: known to differ, or only not known to be the same."""
    if any(c.differences for c in options):
        return "No GPU run trains the baseline's workload: no speedup compares the same work."
    unknown = ", ".join(dict.fromkeys(f for c in options for f in c.unknown_fields))
    return (f"No GPU run is known to train the baseline's workload ({unknown} not recorded): no speedup is "
            "known to compare the same work.")  # fmt: skip


def _like_for_like_elsewhere(ctx: ReportContext, options: Sequence[Comparison]) -> list[str]:
    """For GPU options not like for like with the baseline: another CPU group of the report that trains
    their workload, and the --baseline that compares them in full (their lines give the like-for-like
    speedup where compare.own_baselines found it); one line per such CPU group."""
    tuned = {r.run_id for r in ctx.runs if tn.final_tag(r) is not None}
    others = [g for g in ctx.groups if g.kind == "cpu" and g is not ctx.baseline]
    found: dict[str, tuple[str, int, bool]] = {}  # the CPU run named -> (its workload, options, all lined)
    for c in options:
        own = ctx.own_baselines.get(c.group.run_ids)
        lined = own.baseline if own is not None and own.speedup is not None else None  # the line's CPU run
        trains = (g for g in others if _trains(c.group, g, tuned))
        match = lined or (None if _same_work(c, ctx) else next(trains, None))
        if match is not None:
            name, count, all_lined = found.get(match.first.run_id, (match.first.workload_name, 0, True))
            found[match.first.run_id] = (name, count + 1, all_lined and lined is not None)
    return [
        f"{run_id} ({name}) trains the workload of {f'{count} GPU options' if count > 1 else 'a GPU option'} "
        + (f"here: {'their lines give' if count > 1 else 'its line gives'} the like-for-like speedup; "
           f"--baseline {run_id} compares them in full." if lined
           else f"here: --baseline {run_id} compares them like for like.")
        for run_id, (name, count, lined) in found.items()
    ]  # fmt: skip


def _trains(option: Group, cpu: Group, tuned: set[str]) -> bool:
    """The CPU group trains the option's workload: like for like, or (both tuned final runs) one task."""
    mine, theirs = option.first.workload, cpu.first.workload
    both_tuned = tuned.issuperset(option.run_ids) and tuned.issuperset(cpu.run_ids)
    return signature.like_for_like(mine, theirs) or (both_tuned and tn.same_task_of(mine, theirs))


def caveats(ctx: ReportContext, options: Sequence[Comparison]) -> list[tuple[int, str]]:
    """Every caveat with its weight, in order of weight (stable), without repeats."""
    found: list[tuple[int, str]] = []
    base = ctx.baseline
    if base is not None:
        weak = group_weak_reasons(base, ctx.settings.thresholds)
        if weak:
            found.append((INVALIDATES, f"The baseline is weak: {'; '.join(weak)}."))
        base_disagrees = sp.repeats_disagree(base.analyses)
        if base_disagrees:
            found.append((INVALIDATES, f"The baseline's {base_disagrees}."))
        for overlap in concurrency.overlaps(ctx.analyses):
            found.append((INVALIDATES if overlap.same_boot else UNSURE, f"{overlap.text()}."))
        if options and no_cpu_group(ctx):
            found.append((UNSURE, f"{NO_CPU_RUN}: the lines compare GPUs with a GPU, not with CPUs."))
    if options and not any(_same_work(c, ctx) for c in options):
        found.append((INVALIDATES, _not_the_same_work(options)))
    found += [(INVALIDATES, text) for text in _like_for_like_elsewhere(ctx, options)]
    for c in options:
        own = sp.repeats_disagree(c.group.analyses)
        found += [(INVALIDATES, f"{c.group.name}: {own}.")] if own else []
        idle = gpu_idle(c.group)
        found += [(INVALIDATES, f"{c.group.name}: {idle}.")] if idle else []
        held = gpu_held_down(c.group, ctx.settings.thresholds)
        found += [(UNSURE, f"{c.group.name}: {held}.")] if held else []
        contended = gpu_host_contended(c.group)
        found += [(UNSURE, f"{c.group.name}: {contended}.")] if contended else []
        found += [(INVALIDATES, f"{a.run_id}: {note}.") for a in c.group.analyses
                  if (note := a.gpu_state.utilization_note)]  # fmt: skip
    found += [(INVALIDATES, f"Not in this decision: {why}.") for why in ctx.unsized]
    found += [(INVALIDATES, _not_timed(a)) for a in ctx.analyses if a.throughput.not_timed]
    found += [(INVALIDATES, f"{a.run_id} was {note}.") for a in ctx.analyses if (note := a.device_mismatch)]
    if ctx.left_out:
        named = ", ".join(f"{a.run_id} ({a.incomplete})" for a in ctx.left_out)
        found.append((UNSURE, f"Left out as incomplete: {named}."))
    analyses = [a for c in options for a in c.group.analyses] + (list(base.analyses) if base else [])
    found += [(UNSURE, text if text.endswith(".") else f"{text}.") for a in analyses for text in a.caveats]
    single = _single_runs(options, base)
    found += [(UNSURE, single)] if single else []
    unrecorded = [
        a.run_id for c in options for a in c.group.analyses if a.verdict.numbers.get("cpu_util_pct") is None
    ]
    if unrecorded:
        named = ", ".join(unrecorded)
        found.append((UNSURE, f"The host was not recorded ({named}): what the GPU waited on is not known."))
    doubts = rate_doubts(analyses)
    if doubts:
        found.append((UNSURE, "Steady rate in doubt: " + "; ".join(doubts) + "."))
    gpu_runs = [a for c in options for a in c.group.analyses]
    if any(a.steady_energy is not None and a.steady_energy.is_partial for a in gpu_runs):
        found.append(
            (PARTIAL, "Energy is the GPU board's alone: the host's CPU and memory were not measured.")
        )
    if any(c.break_even is not None and "not priced" in (c.break_even.reason or "") for c in options):
        found.append((PARTIAL, "No break-even without prices: give --gpu-price (and --cpu-price)."))
    bounded = tuned_text.caveat([p for c in options if (p := ctx.tuned_pair(c))])
    if bounded:
        found.append((PARTIAL, bounded))
    unique = list(dict.fromkeys(found))
    return sorted(unique, key=lambda item: item[0])


def _not_timed(a: RunAnalysis) -> str:
    """Why a run has no rate though it counted steps: its step log came in too few bursts."""
    bursts = a.throughput.bursts
    return (
        f"{a.run_id}'s steps are not timed: its step log came in {bursts} burst{'s' * (bursts != 1)} "
        "(buffered output), so it has no rate to compare; run the job with its output unbuffered, or give "
        "each progress line its own time_unix."
    )


def _single_runs(options: Sequence[Comparison], base: Group | None) -> str | None:
    """Which side's run-to-run spread is not measured: one run a side, or the one side with a single run."""
    if not options or all(c.interval is not None and c.interval.basis == sp.REPEATS for c in options):
        return None
    once = [c.group.name for c in options if len(c.group.analyses) < 2]
    base_once = base is not None and len(base.analyses) < 2
    if base_once and once:
        return f"One run a side: {sp.SPREAD_NOT_MEASURED}; repeat the runs to bound it."
    if base_once:
        return f"One run of the baseline: its {sp.SPREAD_NOT_MEASURED}; repeat it to bound it."
    if once:
        its, it = ("its", "it") if len(once) == 1 else ("their", "them")
        return f"One run of {', '.join(once)}: {its} {sp.SPREAD_NOT_MEASURED}; repeat {it} to bound it."
    return None
