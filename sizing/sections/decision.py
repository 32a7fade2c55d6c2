"""The Decision block that opens the report: one short line per GPU option against the baseline, then at
most MAX_CAVEATS caveats in order of weight. Every figure in it is one the sections below show in full;
a figure that cannot be trusted is qualified in its own line, as in the headline."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sizing.analysis import headroom as hr
from sizing.analysis import peaks
from sizing.analysis import speedup as sp
from sizing.analysis import tuning as tn
from sizing.analysis.compare import Comparison, Group
from sizing.analysis.throughput import FROM_TOTALS
from sizing.analysis.validity import gpu_idle, like_for_like_text
from sizing.context import ReportContext
from sizing.sections import tuning as tuned_text
from sizing.sections.decision_caveats import NO_CPU_RUN, caveats, gpu_options, no_cpu_group
from sizing.sections.money_text import energy_doubt, energy_unknown_reason, energy_unknown_word, life_text
from sizing.text import fmt, fmt_usd, steps_only_rate

MAX_CAVEATS = 3
FAR_BELOW_PEAK_MFU = 0.10  # below this share of the dense peak, the speedup measures the code feeding the GPU
HOST_LIMITS = (hr.HOST_WAIT, hr.IDLE_WAITING, hr.LAUNCH_BOUND)
WAITED_VERDICTS = ("host-bound", "GPU underused", "I/O-bound")


@dataclass(frozen=True)
class Option:
    name: str
    group: tuple[str, ...]
    line: str
    speedup: float | None
    interval: sp.SpeedupInterval | None
    energy_j_per_1k_examples: float | None
    usd_per_1k_examples: float | None
    usd_is_energy_only: bool
    break_even_hours: float | None
    break_even_reason: str | None
    mfu: float | None
    why_not_at_limit: str | None
    tuned: tn.TunedPair | None = None  # where either side is a tuned run (sizing.sections.tuning)
    own_baseline: Comparison | None = None  # against its own workload's CPU run, where not the baseline's


@dataclass(frozen=True)
class Decision:
    baseline: str  # what every speedup is against
    options: tuple[Option, ...]
    caveats: tuple[str, ...]
    caveats_not_shown: int
    lines_without_option: tuple[str, ...] = ()  # what to say when there is no GPU option


def _interval(i: sp.SpeedupInterval | None, g: Group) -> str:
    """What bounds the speedup ("95 % CI 6.4–9.4×" and the like), for its parentheses; "" where nothing."""
    if i is None:
        return ""
    span = f"{i.low:.1f}–{i.high:.1f}×"
    machines = g.machines
    if len(g.analyses) > 1 and machines is not None and machines > 1:
        span += f", {len(g.analyses)} runs on {machines} machines"
    if i.basis == sp.REPEATS:
        return f"95 % CI {span}"
    if i.basis == sp.ONE_SIDE:
        return f"range {span} over repeats of one side"
    return f"within-run {span}; {sp.SPREAD_NOT_MEASURED}"


def _unbounded(c: Comparison, ctx: ReportContext) -> str:
    """Why a speedup has no interval where a side's rate is training.json's totals (no step log to bound
    it); "" otherwise (a step log too short for one is a caveat of its own)."""
    if c.speedup is None or c.interval is not None:
        return ""
    groups = [g for g in (c.group, ctx.baseline) if g is not None]
    totals = [a.run_id for g in groups for a in g.analyses if a.throughput.source == FROM_TOTALS]
    if not totals:
        return ""
    single = all(len(g.analyses) == 1 for g in groups)
    return (f"no interval: the rate of {', '.join(totals)} is training.json's totals (no usable step log)"
            + (f"; {sp.SPREAD_NOT_MEASURED}" if single else ""))  # fmt: skip


def _energy(g: Group) -> str:
    if g.j_per_1k_examples.mean is None:
        return f"energy {energy_unknown_word(energy_unknown_reason(g))}"
    partial = any(a.steady_energy is not None and a.steady_energy.is_partial for a in g.analyses)
    estimate = "≈ " if g.energy_is_estimate else ""
    notes = ["GPU board only"] if partial else []
    if doubt := energy_doubt(g):
        notes.append(f"doubtful: {doubt}")
    return f"{estimate}{fmt(g.j_per_1k_examples.mean, 0, ' J')}" + (f" ({'; '.join(notes)})" if notes else "")


def _usd(g: Group) -> tuple[str, float | None, bool]:
    if g.total_usd_per_1k.mean is not None:
        return f"{fmt_usd(g.total_usd_per_1k.mean)} (energy + hardware)", g.total_usd_per_1k.mean, False
    if g.energy_usd_per_1k.mean is not None:
        return f"{fmt_usd(g.energy_usd_per_1k.mean)} (energy only)", g.energy_usd_per_1k.mean, True
    return "cost unknown", None, False


NOT_COMPUTED = "not computed: "


def _break_even(c: Comparison, ctx: ReportContext) -> str:
    even = c.break_even
    if even is None:
        return ""
    if even.hours is None:
        if "not priced" in even.reason:
            return "break-even: needs --gpu-price"
        if even.reason.startswith(NOT_COMPUTED):
            return f"break-even not computed ({even.reason.removeprefix(NOT_COMPUTED)})"
        return f"no break-even: {even.reason}"
    if even.hours == 0:
        return "pays back at once"
    estimate = " (an estimate)" if even.is_estimate else ""
    life = life_text(ctx.settings.prices)
    if even.bound == "at most":
        return f"pays back within {fmt(even.hours, 1)} GPU hours{estimate} on the energy alone ({life})"
    return f"pays back after {fmt(even.hours, 1)} GPU hours{estimate} ({life})"


def _headroom(g: Group) -> tuple[str, float | None, str | None]:
    """'MFU 0.3 % of the dense TF32 peak; why: waiting on the host: the code feeding the GPU, not the GPU,
    sets this speedup', the mean MFU and the why-label."""
    runs = [a.headroom for a in g.analyses if a.headroom is not None]
    if not runs:
        return "", None, None
    mfu, figure = _mfu(runs)
    counted = [h for h in runs if h.limit_from_counters] or runs
    why = hr.limit_text(counted[0]).removeprefix("why: ")
    if why.startswith(f"why ({hr.FROM_UTILIZATION}): "):
        why = f"{why.split(': ', 1)[1]} (from utilization only)"
    label = counted[0].limit
    if mfu is None:
        return f"MFU not known; {why}" if why else "MFU not known", None, label
    text = figure + (f": {why}" if why else "")
    verdicts = [a.verdict.primary for a in g.analyses if a.verdict.primary in WAITED_VERDICTS]
    if mfu < FAR_BELOW_PEAK_MFU and (label in HOST_LIMITS or verdicts):
        if label not in HOST_LIMITS and verdicts[0] not in why:  # the verdict, not the label, says so
            text += f"; {verdicts[0]}"
        text += ", so the code feeding the GPU, not the GPU, sets this speedup"
    return text, mfu, label


def _why_no_speedup(c: Comparison, ctx: ReportContext) -> str:
    """' (its examples per step not known: record it with --batch)', or '' where the line says why."""
    base = ctx.baseline
    for side, group in (("its", c.group), ("the baseline's", base)):
        if group is not None and group.examples_per_s.mean is None and group.steps_per_s.mean:
            return f" ({side} examples per step not known: record it with --batch)"
    return ""


def option(c: Comparison, ctx: ReportContext) -> Option:
    g = c.group
    name = g.first.hardware_name
    pair = ctx.tuned_pair(c)
    if not c.like_for_like and not (pair and pair.same_task):  # a tuned pair's clause names its settings
        name += f" ({like_for_like_text(c).replace(' (', ': ', 1).removesuffix(')')})"
    idle = bool(gpu_idle(g))
    if idle:
        name += f" ({IDLE_MARK})"
    speed = (
        f"speedup unknown{_why_no_speedup(c, ctx)}"
        if c.speedup is None
        else f"{c.speedup:.1f}× " + ("faster" if c.speedup >= 1 else "as fast")
    )
    notes = [_interval(c.interval, g) or _unbounded(c, ctx)]
    if c.in_steps and c.speedup is not None:
        speed += " in steps/s"
        notes.insert(0, "examples per step not known")
    speed += f" ({'; '.join(n for n in notes if n)})" if any(notes) else ""
    own = ctx.own_baselines.get(g.run_ids)
    usd_text, usd, energy_only = _usd(g)
    room, mfu, label = _headroom(g)
    if idle:  # no utilization verdict of a GPU that did no work
        room = (f"MFU {mfu * 100:.2g} %" if mfu is not None else "MFU not known") + f": {IDLE_MARK}"
    even = _break_even(c, ctx)
    parts = [speed, _own_workload(own),
             f"{_energy(g)} and {usd_text} per 1,000 examples", even, room,
             tuned_text.clause(pair) if pair and pair.same_task else ""]  # fmt: skip
    line = f"{name}: " + "; ".join(p for p in parts if p) + "."
    return Option(
        name=name,
        group=g.run_ids,
        line=line,
        speedup=c.speedup,
        interval=c.interval,
        energy_j_per_1k_examples=g.j_per_1k_examples.mean,
        usd_per_1k_examples=usd,
        usd_is_energy_only=energy_only,
        break_even_hours=c.break_even.hours if c.break_even else None,
        break_even_reason=c.break_even.reason if c.break_even and c.break_even.hours is None else None,
        mfu=mfu,
        why_not_at_limit=label,
        tuned=pair,
        own_baseline=own,
    )


def _own_workload(own: Comparison | None) -> str:
    """'like for like, against the CPU run of its workload (…): 75.2× faster (within-run …)', or ''."""
    if own is None or own.speedup is None or own.baseline is None:
        return ""
    base, bound = own.baseline, _interval(own.interval, own.group)
    return (f"like for like, against {base.first.hardware_name} ({base.kind.upper()}, "
            f"{', '.join(base.run_ids)}) training its workload: {own.speedup:.1f}× "
            f"{'faster' if own.speedup >= 1 else 'as fast'}" + (f" ({bound})" if bound else ""))  # fmt: skip


NO_GPU_RUN = "No GPU run to compare with the baseline"
IDLE_MARK = "its GPU did no work"


def _baseline_line(ctx: ReportContext) -> str:
    base = ctx.baseline
    if base is None:
        return ""
    rate = steps_only_rate(base.examples_per_s.mean, base.steps_per_s.mean) or fmt(
        base.examples_per_s.mean, 3, " examples/s", unknown="examples/s unknown"
    )
    runs = f", {len(base.analyses)} runs" if len(base.analyses) > 1 else ""
    what = f"{base.first.hardware_name} ({base.kind.upper()})"
    return f"Against {what} training {base.first.workload_name}: {rate}{runs}{_baseline_mfu(base)}."


def _baseline_mfu(g: Group) -> str:
    """'; MFU 41 % (FP32)' of the baseline's runs; '' where not known, which the Bottleneck table says why.
    A GPU baseline (no CPU run, or --baseline) also says what held it, as a GPU option's line does."""
    if g.kind == "gpu":
        room, _, _ = _headroom(g)
        return f"; {room.replace('sets this speedup', 'sets this rate')}" if room else ""
    _, figure = _mfu([a.headroom for a in g.analyses if a.headroom is not None])
    return f"; {figure}" if figure else ""


def _mfu(runs: Sequence[hr.Headroom]) -> tuple[float | None, str]:
    """The runs' mean MFU and 'MFU 0.24 % (TF32)' ('≥' where every peak is an upper bound: a CPU's at its
    cpufreq max clock); (None, '') where no run's is known."""
    known = [h for h in runs if h.mfu is not None and h.math_dtype is not None]
    if not known:
        return None, ""
    mfu = sum(h.mfu or 0.0 for h in known) / len(known)
    dtype = peaks.DTYPE_NAMES.get(known[0].math_dtype or "", known[0].math_dtype or "")
    bound = "≥ " if all(h.mfu_is_lower_bound for h in known) else ""
    return mfu, f"MFU {bound}{mfu * 100:.2g} % ({dtype})"


def decision(ctx: ReportContext) -> Decision:
    """The Decision block (sizing.sections.definitions "Decision")."""
    chosen = gpu_options(ctx)
    weighted = caveats(ctx, chosen)
    shown = tuple(text for _, text in weighted[:MAX_CAVEATS])
    if ctx.baseline is None:
        without = ("No complete run: nothing to compare.",)
    elif not chosen and any(a.kind == "gpu" for a in ctx.left_out):
        without = ("No complete GPU run: every GPU run was left out as incomplete (see the caveats; "
                   "--include-incomplete averages them in).",)  # fmt: skip
    elif not chosen and no_cpu_group(ctx):
        left_out = any(a.kind == "cpu" for a in ctx.left_out)
        without = (
            f"{NO_CPU_RUN}: every CPU run was left out as incomplete (see the caveats; --include-incomplete "
            "averages them in)." if left_out
            else f"{NO_CPU_RUN}: add one of the same workload (./scripts/collect_cpu.sh).",
        )  # fmt: skip
    elif not chosen and (on_cpu := [a for a in ctx.analyses if a.device_mismatch]):
        without = (f"{NO_GPU_RUN}: {len(on_cpu)} run(s) recorded for a GPU "
                   "trained on the CPU (see the caveats).",)  # fmt: skip
    elif not chosen and ctx.unsized:
        without = (f"{NO_GPU_RUN}: {len(ctx.unsized)} run(s) given could not be "
                   "sized (see the caveats).",)  # fmt: skip
    elif not chosen:
        how = " with the same command after --" if ctx.baseline.first.workload.get("job") else ""
        without = (f"{NO_GPU_RUN}: add one of the same workload (./scripts/collect_gpu.sh{how}).",)
    else:
        without = ()
    hidden = max(0, len(weighted) - MAX_CAVEATS)
    return Decision(_baseline_line(ctx), tuple(option(c, ctx) for c in chosen), shown, hidden, without)


def decision_json(d: Decision) -> dict:
    return {
        "baseline": d.baseline or None,
        "options": [
            {
                "name": o.name, "group": list(o.group), "line": o.line, "speedup": o.speedup,
                "speedup_interval": None if o.interval is None else {
                    "low": o.interval.low, "high": o.interval.high, "basis": o.interval.basis,
                    "text": o.interval.text,
                },
                "energy_j_per_1k_examples": o.energy_j_per_1k_examples,
                "usd_per_1k_examples": o.usd_per_1k_examples, "usd_is_energy_only": o.usd_is_energy_only,
                "break_even_hours": o.break_even_hours, "break_even_reason": o.break_even_reason,
                "mfu": o.mfu, "why_not_at_limit": o.why_not_at_limit,
                "like_for_like": None if o.own_baseline is None or o.own_baseline.baseline is None else {
                    "baseline_runs": list(o.own_baseline.baseline.run_ids),
                    "speedup": o.own_baseline.speedup,
                    "speedup_interval": None if o.own_baseline.interval is None else {
                        "low": o.own_baseline.interval.low, "high": o.own_baseline.interval.high,
                        "basis": o.own_baseline.interval.basis, "text": o.own_baseline.interval.text,
                    },
                },
                "tuned": None if o.tuned is None else {
                    "speedup_at_best": o.tuned.at_best, "speedup_at_user_setting": o.tuned.at_user,
                    "speedup_at_user_setting_unknown_reason": o.tuned.at_user_unknown,
                    "not_tuned": o.tuned.not_tuned, "batches_differ": o.tuned.batches_differ,
                    "clause": tuned_text.clause(o.tuned),
                },
            }
            for o in d.options
        ],
        "lines_without_option": list(d.lines_without_option),
        "caveats": list(d.caveats),
        "caveats_not_shown": d.caveats_not_shown,
    }  # fmt: skip
