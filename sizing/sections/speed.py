"""Report sections about speed and money: settings, runs, comparison, time to target, energy and cost."""

from __future__ import annotations

from sizing.analysis import money
from sizing.analysis import speedup as sp
from sizing.analysis import throughput as tp
from sizing.analysis.compare import Comparison
from sizing.analysis.energy import gpu_name
from sizing.analysis.validity import interval_json, like_for_like_text
from sizing.context import ReportContext
from sizing.model import DEFAULT_UTILISATION, JOULES_PER_KWH, Section, Table
from sizing.output.json_out import break_even_json, spread_json
from sizing.sections import money_text as mt
from sizing.text import NO_PRICE, NOT_MEASURED, fmt, fmt_seconds, fmt_spread, fmt_usd, marked


def _pairs(pairs: tuple[tuple[str, float], ...], unit: str) -> str:
    return ", ".join(f"{k}: {fmt_usd(v) if unit == '$' else f'{v:g} {unit}'}" for k, v in pairs)


def _with_specific(every: float | None, specific: str) -> str:
    """'$2,000.00', '$2,000.00; H100: $25,000.00', 'H100: $25,000.00; others: no price given'."""
    if not specific:
        return fmt_usd(every)
    return f"{fmt_usd(every)}; {specific}" if every is not None else f"{specific}; others: {NO_PRICE}"


def settings_section(ctx: ReportContext) -> Section:
    s = ctx.settings
    p, t = s.prices, s.thresholds
    tdp = f"{p.cpu_tdp_w:g} W" if p.cpu_tdp_w is not None else "not given"
    per_host, per_model, hosts = (
        _pairs(p.cpu_tdp_by_host, "W"),
        _pairs(p.gpu_price_by_model, "$"),
        _pairs(p.host_price_by_host, "$"),
    )
    rows = (
        ("Tariff", f"${p.tariff_per_kwh:g} per kWh" if p.tariff_per_kwh is not None else NO_PRICE),
        ("GPU price (each GPU)", _with_specific(p.gpu_price, per_model)),
        ("Host price (without GPUs)", _with_specific(p.cpu_price, hosts)),
        ("Amortisation", f"{p.amortise_years:g} years"),
        (
            "Utilisation",
            f"{p.utilisation:.0%} of the time busy (default {DEFAULT_UTILISATION:.0%}; --utilisation)",
        ),
        ("Value of an hour saved", fmt_usd(p.value_per_hour)),
        ("CPU TDP for an estimate", tdp + (f" ({per_host})" if per_host else "")),
        ("Idle floor of the estimate", f"{p.idle_fraction:.0%} of TDP"),
        ("Temperature threshold", f"{t.temp_threshold_c:g} °C"),
        ("Target steps", f"{s.target_steps:,}"),
        ("Target loss", fmt(ctx.target_loss, 4) + ("" if s.target_loss is not None else " (reached by all)")),
    )
    data = {
        "tariff_usd_per_kwh": p.tariff_per_kwh,
        "gpu_price_usd": p.gpu_price,
        "gpu_price_usd_by_model": dict(p.gpu_price_by_model),
        "host_price_usd": p.cpu_price,
        "host_price_usd_by_host": dict(p.host_price_by_host),
        "amortise_years": p.amortise_years,
        "utilisation": p.utilisation,
        "life_hours": money.life_hours(p),
        "value_usd_per_hour": p.value_per_hour,
        "cpu_tdp_w": p.cpu_tdp_w,
        "cpu_tdp_w_by_host": dict(p.cpu_tdp_by_host),
        "idle_fraction": p.idle_fraction,
        "temp_threshold_c": t.temp_threshold_c,
        "target_steps": s.target_steps,
        "target_loss": ctx.target_loss,
        "target_loss_given": s.target_loss is not None,
    }
    return Section("settings", "Settings", data, (Table("Settings", ("Setting", "Value"), rows),))


def runs_section(ctx: ReportContext) -> Section:
    rows, data = [], []
    for a in ctx.analyses:
        t = a.throughput
        budget = (
            f"{t.steps_in_budget:,} in {fmt_seconds(t.budget_s)}" if t.steps_in_budget is not None else "n/a"
        )
        rows.append((
            a.run_id, a.label, a.kind.upper(), a.hardware_name, a.workload_name,
            t.source, fmt(t.steps_total, 0), budget, fmt_seconds(t.first_step_s),
            fmt(t.steps_per_s, 3, unknown=t.steps_unknown),
            fmt(t.examples_per_s, 3, unknown=t.examples_unknown),
        ))  # fmt: skip
        data.append(
            {
                "run_id": a.run_id,
                "throughput_source": t.source,
                "steps_total": t.steps_total,
                "first_step_s": t.first_step_s,
            }
        )
    headers = ("Run", "Label", "Device", "Hardware", "Workload", "Throughput from", "Steps",
               "Steps within budget", "First step", "Steady steps/s", "Steady examples/s")  # fmt: skip
    return Section("runs", "Runs", data, (Table("Runs", headers, tuple(rows)),))


def comparison_rows(ctx: ReportContext) -> list[tuple[str, ...]]:
    rows = []
    for c in ctx.comparisons:
        g = c.group
        if c.is_baseline:
            like, speed, even, interval = "baseline", "1.00× (baseline)", "baseline", "—"
        else:
            like = "yes" if c.like_for_like else like_for_like_text(c)
            speed, interval = fmt(c.speedup, 2, "×"), interval_cell(c) or "n/a (nothing bounds it)"
            even = "n/a (CPU)" if g.kind != "gpu" else mt.break_even_cell(c)
        steps = "n/a (batch differs)"
        if c.batches_match or c.is_baseline:
            steps = f"{fmt_spread(g.steps_per_s, 3)} steps/s, " + fmt(
                _j_per_1k_steps(g), 0, " J per 1,000 steps", unknown=NOT_MEASURED
            )
        estimate = g.energy_is_estimate
        rows.append((
            g.name, str(len(g.run_ids)),
            fmt_spread(g.examples_per_s, 3, g.examples_unknown), speed, interval,
            like,
            marked(fmt_spread(g.j_per_1k_examples, 0, f"{NOT_MEASURED} ({mt.energy_unknown_reason(g)})"),
                   estimate),
            marked(fmt_usd(g.energy_usd_per_1k.mean, NOT_MEASURED), estimate),
            fmt_usd(g.hardware_usd_per_1k.mean, mt.hardware_missing(g, ctx.settings.prices)),
            marked(fmt_usd(g.total_usd_per_1k.mean, _total_unknown(g)), estimate),
            steps, even,
        ))  # fmt: skip
    return rows


def interval_cell(c: Comparison) -> str:
    """The interval in a table cell: '95 % CI 1.9–2.1', 'range 6.9–9.0, one side repeated', 'within-run
    8.5–9.7; run-to-run spread not measured'."""
    i = c.interval
    if i is None:
        return ""
    span = f"{i.low:.2f}–{i.high:.2f}"
    if i.basis == sp.REPEATS:
        return f"95 % CI {span}"
    if i.basis == sp.ONE_SIDE:
        return f"range {span}, repeats on one side"
    return f"within-run {span}; {sp.SPREAD_NOT_MEASURED}"


def _j_per_1k_steps(g) -> float | None:
    known = [a.j_per_1k_steps for a in g.analyses if a.j_per_1k_steps is not None]
    return sum(known) / len(known) if known else None


def _total_unknown(g) -> str:
    if g.energy_usd_per_1k.mean is None:
        return f"n/a (energy {NOT_MEASURED})"
    return f"n/a ({g.first.hardware_price.missing or NO_PRICE})"


def comparison_data(ctx: ReportContext) -> list[dict]:
    """One entry per configuration (group of repeats), the baseline included."""
    found = []
    for c in ctx.comparisons:
        g = c.group
        same_batch = c.batches_match or c.is_baseline
        found.append({
            "name": g.name, "group": list(g.run_ids), "is_baseline": c.is_baseline, "device": g.kind,
            "examples_per_s": spread_json(g.examples_per_s),
            "steps_per_s": spread_json(g.steps_per_s) if same_batch else None,
            "speedup": 1.0 if c.is_baseline else c.speedup,
            "speedup_ci95": list(c.speedup_ci95) if c.speedup_ci95 else None,
            "speedup_interval": interval_json(c), "repeats_disagree": list(c.repeats_disagree),
            "like_for_like": True if c.is_baseline else c.like_for_like, "differences": list(c.differences),
            "energy_j_per_1k_examples": spread_json(g.j_per_1k_examples),
            "energy_j_per_1k_steps": _j_per_1k_steps(g) if same_batch else None,
            "energy_is_estimate": g.energy_is_estimate,
            "energy_usd_per_1k_examples": g.energy_usd_per_1k.mean,
            "hardware_usd_per_1k_examples": g.hardware_usd_per_1k.mean,
            "total_usd_per_1k_examples": g.total_usd_per_1k.mean,
            **break_even_json(c),
        })  # fmt: skip
    return found


def comparison_section(ctx: ReportContext) -> Section:
    headers = ("Configuration", "Runs", "Examples/s", "Speedup", "Speedup interval", "Like-for-like",
               "J per 1,000 examples", "Energy $ per 1,000 examples", "Hardware $ per 1,000 examples",
               "Total $ per 1,000 examples",
               "Per step (same batch only)", "Break-even (GPU hours)")  # fmt: skip
    note = (
        "Mean ± sample standard deviation (min–max, n) over repeats (same workload and hardware). "
        "Energy is board/package energy, not wall power."
    )
    table = Table("Comparison", headers, tuple(comparison_rows(ctx)), note)
    return Section("comparison", "Comparison", comparison_data(ctx), (table,))


def time_to_section(ctx: ReportContext) -> Section:
    rows, data = [], []
    for run, a in zip(ctx.runs, ctx.analyses, strict=True):
        to_steps = tp.time_to_steps(
            run.training, run.training_info, ctx.settings.target_steps, a.throughput.steps_per_s
        )
        steps_text = fmt_seconds(to_steps.seconds) + (" (projected)" if to_steps.projected else "")
        loss_text, hit = "n/a", None
        if ctx.target_loss is not None:
            hit = tp.time_to_loss(run.training, run.training_info, ctx.target_loss)
            loss_text = (
                "not reached" if hit.seconds is None else f"{fmt_seconds(hit.seconds)} (step {hit.step:,.0f})"
            )
        rows.append((a.run_id, steps_text, loss_text, fmt(a.min_smoothed_loss, 4)))
        data.append({
            "run_id": a.run_id, "target_steps": ctx.settings.target_steps,
            "time_to_target_steps_s": to_steps.seconds, "time_to_target_steps_projected": to_steps.projected,
            "target_loss": ctx.target_loss,
            "time_to_target_loss_s": hit.seconds if hit else None,
            "target_loss_reached_at_step": hit.step if hit and hit.seconds is not None else None,
            "lowest_smoothed_loss": a.min_smoothed_loss,
        })  # fmt: skip
    headers = ("Run", f"Time to {ctx.settings.target_steps:,} steps",
               f"Time to loss ≤ {fmt(ctx.target_loss, 4)}", "Lowest smoothed loss")  # fmt: skip
    table = Table(
        "Time to target", headers, tuple(rows), "Elapsed training time, from training.json's start."
    )
    return Section("time_to", "Time to target", data, (table,))


def _hardware_unknown(a) -> str:
    if a.hardware_price.usd is not None:
        return f"n/a ({tp.NO_WORK_COUNTER})"
    return a.hardware_price.missing or NO_PRICE


def _coverage_note(energy) -> str:
    """Sources that reset, or that cover less than the whole window."""
    if energy is None:
        return ""
    notes = [f"{s.source} {s.method.split(' (')[0]} covers {s.coverage:.0%}" for s in energy.considered
             if s.coverage < 0.995]  # fmt: skip
    notes += [c for c in energy.checks]
    return f" [{'; '.join(notes)}]" if notes else ""


def energy_section(ctx: ReportContext) -> Section:
    rows, data = [], []
    for a in ctx.analyses:
        steady, whole = a.steady_energy, a.training_energy
        mean_w = steady.total_j / steady.window_s if steady and steady.total_j is not None else None
        kwh = whole.total_j / JOULES_PER_KWH if whole and whole.total_j is not None else None
        idle = ", ".join(f"{gpu_name(i)} {fmt(w, 1, ' W')}" for i, w in steady.idle_gpus_w) if steady else ""
        est = a.energy_is_estimate
        covering = steady or whole
        covers = (covering.covers if covering else NOT_MEASURED) + _coverage_note(covering)
        rows.append((
            a.run_id, covers,
            marked(fmt(a.j_per_1k_examples, 0, unknown=NOT_MEASURED), est),
            marked(fmt(mean_w, 1, unknown=NOT_MEASURED), est),
            marked(fmt(kwh, 4, unknown=NOT_MEASURED), est), idle or "none",
            marked(fmt_usd(a.energy_usd_per_1k_examples, NOT_MEASURED), est),
            fmt_usd(a.hardware_usd_per_1k_examples, _hardware_unknown(a)),
        ))  # fmt: skip
        data.append({
            "run_id": a.run_id, "covers": covering.covers if covering else NOT_MEASURED,
            "charged_gpus": list(a.charged_gpus), "gpu_attribution": a.gpu_attribution,
            "gpu_attribution_known": a.gpu_attribution_known,
            "idle_gpus_mean_w": {gpu_name(i): w for i, w in steady.idle_gpus_w} if steady else {},
            "mean_power_w": mean_w, "training_energy_kwh": kwh,
            "steady": steady.as_json() if steady else None, "training": whole.as_json() if whole else None,
        })  # fmt: skip
    headers = ("Run", "What it covers", "J per 1,000 examples", "Mean power (W)", "Training energy (kWh)",
               "GPUs not charged (mean draw)", "Energy $ per 1,000 examples",
               "Hardware $ per 1,000 examples")  # fmt: skip
    note = ("Board (NVML) and package (RAPL) energy, not wall power. Only the GPUs the training used are "
            "charged; the others' draw is listed apart.")  # fmt: skip
    return Section("energy", "Energy and cost", data, (Table("Energy and cost", headers, tuple(rows), note),))
