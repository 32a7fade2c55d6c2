"""Can the headline's figures be trusted? What the headline says, in the same line, when they cannot.

Comparisons that are not (known to be) like-for-like, a weak CPU baseline (the training used few of its
CPUs, hypervisor steal, a host that swapped, a clock held down, a cgroup quota, a small host, float16
emulated or bfloat16 without native support on a CPU, host-bound), a GPU run that waited on its host, did
no work or had its clocks pulled down, runs left out as incomplete, and steady rates that do not hold up.
"""

from __future__ import annotations

from collections.abc import Sequence

from sizing.analysis import bottleneck, signature
from sizing.analysis.compare import Comparison, Group
from sizing.analysis.run import WORKED_UTIL_PCT, RunAnalysis
from sizing.analysis.runchecks import RATE_MISMATCH_FRACTION, too_few_steps
from sizing.analysis.sessions import DRIFT_WARN_FRACTION
from sizing.analysis.throughput import FROM_STEP_LOG
from sizing.context import ReportContext
from sizing.model import Thresholds

INCLUDE_FLAG = "--include-incomplete"
GPU_WAITED = (bottleneck.HOST_BOUND, bottleneck.IO_BOUND, bottleneck.GPU_UNDERUSED)


def _logical_cpus(a: RunAnalysis) -> float | None:
    stated = a.hardware.get("cpu_cores_logical")
    return float(stated) if stated else a.verdict.numbers.get("logical_cpus")


OTHERS_SHARE = 0.25  # CPUs busy outside the training, as a share of the host's, that make it a contended one
SWAP_GROWTH_BYTES = 2**30  # swap in use grew by at least this in the measurement window: the host swapped
CLOCK_HELD_DOWN = (bottleneck.THERMALLY_THROTTLED, bottleneck.HW_SLOWDOWN, bottleneck.CPU_CLOCK_BELOW_PEAK)


def others_busy(a: RunAnalysis) -> tuple[float, float, float] | None:
    """(logical CPUs other processes kept busy, the host's busy %, its logical CPUs) where they kept at
    least one and OTHERS_SHARE of the host busy while the run trained: a contended host; else None."""
    n, logical = a.verdict.numbers, _logical_cpus(a)
    proc, util = n.get("proc_cpu_pct"), n.get("cpu_util_pct")
    if not logical or proc is None or util is None:
        return None
    others = util / 100 * logical - proc / 100
    return (others, util, logical) if others >= max(1.0, OTHERS_SHARE * logical) else None


def gpu_host_contended(g: Group) -> str:
    """How other processes kept a GPU run's host busy while it trained (what fed the GPU was shared), or
    ''."""
    found = [(a.run_id, busy) for a in g.analyses if a.kind == "gpu" and (busy := others_busy(a))]
    if not found:
        return ""
    run_id, (others, util, logical) = found[0]
    return (f"other processes kept about {others:.1f} of the {logical:.0f} logical CPUs busy while {run_id} "
            f"trained (the host {util:.0f} % busy): what fed the GPU was shared, so the speedup may "
            "understate the GPU")  # fmt: skip


def weak_baseline_reasons(a: RunAnalysis, t: Thresholds) -> list[str]:
    """Why this CPU run under-represents its hardware (empty: no sign of that)."""
    if a.kind != "cpu":
        return []
    n, logical = a.verdict.numbers, _logical_cpus(a)
    found = []
    proc, util = n.get("proc_cpu_pct"), n.get("cpu_util_pct")
    if logical and proc is not None and proc / 100 < t.weak_baseline_cpu_fraction * logical:
        busy = others_busy(a)
        held = (f" while other processes kept about {busy[0]:.1f} more busy (the host {busy[1]:.0f} % busy)"
                if busy else "")  # fmt: skip
        found.append(f"its training used {proc / 100:.1f} of {logical:.0f} logical CPUs{held}")
    elif logical and proc is None and util is not None and util < 100 * t.weak_baseline_cpu_fraction:
        found.append(f"the host was {util:.0f} % busy: under half of its {logical:.0f} logical CPUs")
    elif proc is None and util is None:
        found.append("how many CPUs it used is not measured")
    steal = n.get("cpu_steal_pct")
    if steal is not None and steal > t.steal_pct:
        found.append(f"hypervisor steal {steal:.1f} % > {t.steal_pct:g} %")
    limit = a.hardware.get("cgroup_cpu_limit_cpus")
    if limit is not None and (not logical or limit < logical):
        found.append(f"a cgroup CPU quota allowed {limit:g} CPUs" + (f" of {logical:.0f}" if logical else ""))
    allowed = a.hardware.get("cpu_affinity_cpus")
    if allowed is not None and logical and allowed < logical:
        found.append(f"its CPU set allowed {allowed:.0f} of {logical:.0f} logical CPUs (taskset, Slurm or a "
                     "container's cpuset)")  # fmt: skip
    if logical and logical <= t.small_host_logical_cpus:
        host = "VM" if a.hardware.get("virtual_machine") else "host"
        found.append(f"a small {host} ({logical:.0f} logical CPUs)")
    swapped = n.get("swap_growth_bytes")
    if swapped is not None and swapped >= SWAP_GROWTH_BYTES:
        found.append(f"it swapped: swap in use grew by {swapped / 2**30:.1f} GiB while it trained")
    held = [label for label in CLOCK_HELD_DOWN if label in a.verdict.labels]
    if held:
        found.append(f"its CPU clock was held down ({', '.join(held)})")
    if signature.EMULATED_ON_CPU in str(a.workload.get("precision") or ""):
        found.append(f"its float16 is {signature.EMULATED_ON_CPU}")
    simd, native = a.hardware.get("cpu_simd"), signature.CPU_BF16_FLAGS
    if a.workload.get("precision") == "bfloat16" and simd is not None and not set(simd) & set(native):
        found.append(f"its bfloat16 has no native support on this CPU (none of {', '.join(native)} in "
                     "run.json cpu_simd): converted to float32 and back")  # fmt: skip
    if a.verdict.primary == bottleneck.HOST_BOUND:
        found.append("host-bound: " + "; ".join(a.verdict.evidence))
    if a.busy_other_gpus:
        busy = ", ".join(f"gpu{i} {mean:.0f} %" for i, mean in a.busy_other_gpus)
        found.insert(  # first: it explains the rest
            0,
            f"a GPU was busy while it trained ({busy} on average): it may not have trained on the CPU alone",
        )
    return found


def group_weak_reasons(g: Group, t: Thresholds) -> list[str]:
    found: dict[str, None] = {}
    for a in g.analyses:
        found.update(dict.fromkeys(weak_baseline_reasons(a, t)))
    return list(found)


def like_for_like_text(c: Comparison) -> str:
    parts = []
    if c.differences:
        parts.append(f"NOT like-for-like ({'; '.join(c.differences)})")
    if c.unknown_fields:
        parts.append(f"not known to be like-for-like ({', '.join(c.unknown_fields)} unknown)")
    return "; ".join(parts)


def gpu_waited(g: Group) -> str:
    """How a GPU group's runs were limited by something other than the GPU, or ''."""
    if g.kind != "gpu":
        return ""
    found = [a for a in g.analyses if a.verdict.primary in GPU_WAITED]
    if not found:
        return ""
    a = found[0]
    why = "; ".join(a.verdict.evidence)
    return f"the GPU run was {a.verdict.primary} ({why}): the speedup is not the GPU's limit"


GPU_HELD_DOWN = (bottleneck.THERMALLY_THROTTLED, bottleneck.HW_SLOWDOWN)
IDLE_GPU_UTIL_PCT = WORKED_UTIL_PCT  # every used GPU below this while the run trained: it did no work


def gpu_idle(g: Group) -> str:
    """A GPU group's run whose GPUs did no work while it trained (a job whose code never moved to the GPU),
    or ''. A board shared or sliced by MIG says nothing of the run's own use."""
    if g.kind != "gpu":
        return ""
    for a in g.analyses:
        busiest = a.verdict.numbers.get("gpu_util_max_pct")
        if busiest is not None and busiest < IDLE_GPU_UTIL_PCT and not a.gpu_state.utilization_note:
            said = (
                f"its GPU did no work ({a.run_id}: the busiest used GPU {busiest:.1f} % busy on average, "
                f"< {IDLE_GPU_UTIL_PCT:g} %, while it trained): the rate is its host's, not a GPU's"
            )
            if a.busy_other_gpus:
                others = ", ".join(f"gpu{i} {mean:.0f} %" for i, mean in a.busy_other_gpus)
                said += (f", unless it trained on the busy GPU its record does not name ({others}): then "
                         "training.json's gpu_uuids are wrong")  # fmt: skip
            return said
    return ""


def gpu_held_down(g: Group, t: Thresholds) -> str:
    """How heat or a hardware slowdown pulled a GPU group's clocks down (its runs' verdicts say thermally
    throttled or HW slowdown), or ''."""
    if g.kind != "gpu":
        return ""
    found = []
    for a in g.analyses:
        if not set(GPU_HELD_DOWN) & set(a.verdict.labels):
            continue
        charged = {f"gpu{i}" for i in a.charged_gpus}
        found += [
            f"{a.run_id} {s.source} {s.category} in {s.fraction:.0%} of samples"
            for s in a.throttling
            if s.is_fault and s.source in charged and (s.fraction or 0.0) >= t.throttled_sample_fraction
        ]
    if not found:
        return ""
    return (f"the GPU's clocks were pulled down ({'; '.join(found)}): the speedup is below what the board "
            "gives cooled and healthy")  # fmt: skip


def rate_doubts(analyses: Sequence[RunAnalysis]) -> list[str]:
    found = []
    for a in analyses:
        drift = a.throughput.drift_fraction
        if drift is not None and abs(drift) > DRIFT_WARN_FRACTION:
            found.append(f"{a.run_id}'s steps/s drifted {drift:+.0%} within the run")
        if a.steady_rate_mismatch is not None and a.steady_rate_mismatch > RATE_MISMATCH_FRACTION:
            found.append(f"{a.run_id}'s rate is {a.steady_rate_mismatch:.0%} off its training.json figure")
        few = too_few_steps(a.throughput)
        if few:
            found.append(f"{a.run_id}'s rate {few}")
        if a.throughput.sessions > 1:
            found.append(f"{a.run_id} was resumed or paused ({a.throughput.sessions} sessions)")
        if a.throughput.pauses is not None and a.throughput.pauses.said():
            found.append(f"{a.run_id}'s steady rate holds {a.throughput.pauses.describe()}")
        if a.incomplete:
            found.append(f"{a.run_id} is incomplete ({a.incomplete})")
    return found


def comparison_suffix(c: Comparison, ctx: ReportContext) -> str:
    """What makes this headline line's speedup and break-even doubtful, to end the same line."""
    base = ctx.baseline
    if base is None or c.is_baseline:
        return ""
    parts = [like_for_like_text(c)]
    weak = group_weak_reasons(base, ctx.settings.thresholds)
    if weak:
        parts.append(f"against a WEAK baseline ({'; '.join(weak)})")
    parts.append(gpu_idle(c.group) or gpu_waited(c.group))
    parts.append(gpu_held_down(c.group, ctx.settings.thresholds))
    parts.extend(c.repeats_disagree)
    doubts = rate_doubts([*c.group.analyses, *base.analyses])
    if doubts:
        parts.append("steady rate in doubt: " + "; ".join(doubts))
    shown = [p for p in parts if p]
    return f" — {' — '.join(shown)}" if shown else ""


def baseline_suffix(ctx: ReportContext) -> str:
    base = ctx.baseline
    if base is None:
        return ""
    weak = group_weak_reasons(base, ctx.settings.thresholds)
    doubts = rate_doubts(base.analyses)
    parts = [
        f"WEAK BASELINE: {'; '.join(weak)}" if weak else "",
        "steady rate in doubt: " + "; ".join(doubts) if doubts else "",
    ]
    shown = [p for p in parts if p]
    return f" — {' — '.join(shown)}" if shown else ""


def left_out_lines(ctx: ReportContext) -> list[str]:
    if not ctx.left_out:
        return []
    named = "; ".join(f"{a.run_id} ({a.incomplete})" for a in ctx.left_out)
    return [f"Left out of every average as incomplete (shown apart; {INCLUDE_FLAG} includes them): {named}."]


def run_json_fields(a: RunAnalysis, ctx: ReportContext) -> dict:
    t, ci = a.throughput, a.throughput.steps_per_s_ci95
    drift = t.drift_fraction
    return {
        "complete": a.incomplete is None,
        "incomplete_reason": a.incomplete,
        "in_averages": a not in ctx.left_out,
        "sessions": t.sessions if t.source == FROM_STEP_LOG else None,
        "session_gaps_s": t.session_gaps_s if t.source == FROM_STEP_LOG else None,
        "step_log_bursts": t.bursts if t.source == FROM_STEP_LOG else None,
        "steps_per_s_ci95_low": ci[0] if ci else None,
        "steps_per_s_ci95_high": ci[1] if ci else None,
        "steps_per_s_first_third": t.first_third_steps_per_s,
        "steps_per_s_last_third": t.last_third_steps_per_s,
        "steady_drift_pct": drift * 100 if drift is not None else None,
        "steady_pauses": t.pauses.count if t.pauses else (0 if t.source == FROM_STEP_LOG else None),
        "steady_pause_time_pct": t.pauses.lost_share * 100 if t.pauses else None,
        "steps_per_s_without_pauses": t.pauses.steps_per_s_without if t.pauses else None,
        "steady_rate_vs_training_json_pct": a.steady_rate_mismatch * 100
        if a.steady_rate_mismatch is not None
        else None,
        "weak_baseline_reasons": "; ".join(weak_baseline_reasons(a, ctx.settings.thresholds)) or None,
    }


def comparison_json_fields(c: Comparison, ctx: ReportContext) -> dict:
    weak = group_weak_reasons(ctx.baseline, ctx.settings.thresholds) if ctx.baseline else []
    status = "yes" if c.like_for_like else ("no" if c.differences else "unknown")
    return {
        "like_for_like_status": status,
        "unknown_workload_fields": ", ".join(c.unknown_fields) or None,
        "weak_baseline": bool(weak),
        "weak_baseline_reasons": "; ".join(weak) or None,
        "speedup_within_run_ci95_low": c.within_run_ci95[0] if c.within_run_ci95 else None,
        "speedup_within_run_ci95_high": c.within_run_ci95[1] if c.within_run_ci95 else None,
        "gpu_waited_on": gpu_waited(c.group) or None,
        "speedup_interval": interval_json(c),
        "repeats_disagree": list(c.repeats_disagree),
    }


def interval_json(c: Comparison) -> dict | None:
    i = c.interval
    return None if i is None else {"low": i.low, "high": i.high, "basis": i.basis, "text": i.text}
