"""Report sections about speed and money: settings, runs, comparison, time to target, energy and cost."""

from __future__ import annotations

from sizing import throughput as tp
from sizing.context import ReportContext
from sizing.model import JOULES_PER_KWH, Section, Table
from sizing.text import NO_PRICE, NOT_MEASURED, fmt, fmt_seconds, fmt_spread, fmt_usd, marked
from sizing.validity import like_for_like_text


def settings_section(ctx: ReportContext) -> Section:
    s = ctx.settings
    p, t = s.prices, s.thresholds
    tdp = f"{p.cpu_tdp_w:g} W" if p.cpu_tdp_w is not None else "not given"
    per_host = ", ".join(f"{k}: {w:g} W" for k, w in p.cpu_tdp_by_host)
    rows = (
        ("Tariff", f"${p.tariff_per_kwh:g} per kWh" if p.tariff_per_kwh is not None else NO_PRICE),
        ("GPU price", fmt_usd(p.gpu_price)),
        ("CPU / host price", fmt_usd(p.cpu_price)),
        ("Amortisation", f"{p.amortise_years:g} years of round-the-clock use"),
        ("Value of an hour saved", fmt_usd(p.value_per_hour)),
        ("CPU TDP for an estimate", tdp + (f" ({per_host})" if per_host else "")),
        ("Idle floor of the estimate", f"{p.idle_fraction:.0%} of TDP"),
        ("Temperature threshold", f"{t.temp_threshold_c:g} °C"),
        ("Target steps", f"{s.target_steps:,}"),
        ("Target loss", fmt(ctx.target_loss, 4) + ("" if s.target_loss is not None else " (reached by all)")),
    )
    data = {k: v for k, v in rows}
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
            fmt(t.steps_per_s, 3, unknown=tp.NO_WORK_COUNTER),
            fmt(t.examples_per_s, 3, unknown=tp.NO_WORK_COUNTER),
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
            like, speed, even = "baseline", "1.00× (baseline)", "baseline"
        else:
            like = "yes" if c.like_for_like else like_for_like_text(c)
            ci = f" (95 % CI {c.speedup_ci95[0]:.2f}–{c.speedup_ci95[1]:.2f})" if c.speedup_ci95 else ""
            speed = fmt(c.speedup, 2, "×") + ci
            even = "n/a (CPU)" if g.kind != "gpu" else break_even_cell(c, ctx)
        steps = "n/a (batch differs)"
        if c.batches_match or c.is_baseline:
            steps = f"{fmt_spread(g.steps_per_s, 3)} steps/s, " + fmt(
                _j_per_1k_steps(g), 0, " J per 1,000 steps", unknown=NOT_MEASURED
            )
        estimate = g.energy_is_estimate
        rows.append((
            g.name, str(len(g.run_ids)), fmt_spread(g.examples_per_s, 3, tp.NO_WORK_COUNTER), speed, like,
            marked(fmt_spread(g.j_per_1k_examples, 0, NOT_MEASURED), estimate),
            marked(fmt_usd(g.energy_usd_per_1k.mean, NOT_MEASURED), estimate),
            fmt_usd(g.hardware_usd_per_1k.mean),
            marked(fmt_usd(g.total_usd_per_1k.mean, _total_unknown(g)), estimate),
            steps, even,
        ))  # fmt: skip
    return rows


def _j_per_1k_steps(g) -> float | None:
    known = [a.j_per_1k_steps for a in g.analyses if a.j_per_1k_steps is not None]
    return sum(known) / len(known) if known else None


def _total_unknown(g) -> str:
    if g.energy_usd_per_1k.mean is None:
        return f"n/a (energy {NOT_MEASURED})"
    return f"n/a ({NO_PRICE})"


def break_even_cell(c, ctx: ReportContext) -> str:
    hours = c.break_even_hours
    if hours is None:
        return (
            f"n/a ({NO_PRICE})"
            if ctx.settings.prices.gpu_price is None
            else "n/a (no value per hour or energy)"
        )
    return marked(fmt(hours, 1), c.break_even_is_estimate)


def comparison_section(ctx: ReportContext) -> Section:
    headers = ("Configuration", "Runs", "Examples/s", "Speedup", "Like-for-like", "J per 1,000 examples",
               "Energy $ per 1,000 examples", "Hardware $ per 1,000 examples", "Total $ per 1,000 examples",
               "Per step (same batch only)", "Break-even (GPU hours)")  # fmt: skip
    note = (
        "Mean ± sample standard deviation (min–max, n) over repeats (same workload and hardware). "
        "Energy is board/package energy, not wall power."
    )
    return Section(
        "comparison", "Comparison", [], (Table("Comparison", headers, tuple(comparison_rows(ctx)), note),)
    )


def time_to_section(ctx: ReportContext) -> Section:
    rows = []
    for run, a in zip(ctx.runs, ctx.analyses, strict=True):
        to_steps = tp.time_to_steps(
            run.training, run.training_info, ctx.settings.target_steps, a.throughput.steps_per_s
        )
        steps_text = fmt_seconds(to_steps.seconds) + (" (projected)" if to_steps.projected else "")
        loss_text = "n/a"
        if ctx.target_loss is not None:
            hit = tp.time_to_loss(run.training, run.training_info, ctx.target_loss)
            loss_text = (
                "not reached" if hit.seconds is None else f"{fmt_seconds(hit.seconds)} (step {hit.step:,.0f})"
            )
        rows.append((a.run_id, steps_text, loss_text, fmt(a.min_smoothed_loss, 4)))
    headers = ("Run", f"Time to {ctx.settings.target_steps:,} steps",
               f"Time to loss ≤ {fmt(ctx.target_loss, 4)}", "Lowest smoothed loss")  # fmt: skip
    table = Table(
        "Time to target", headers, tuple(rows), "Elapsed training time, from training.json's start."
    )
    return Section("time_to", "Time to target", [], (table,))


def energy_section(ctx: ReportContext) -> Section:
    rows, data = [], []
    for a in ctx.analyses:
        steady, whole = a.steady_energy, a.training_energy
        mean_w = steady.total_j / steady.window_s if steady and steady.total_j is not None else None
        kwh = whole.total_j / JOULES_PER_KWH if whole and whole.total_j is not None else None
        idle = ", ".join(f"gpu{i} {fmt(w, 1, ' W')}" for i, w in steady.idle_gpus_w) if steady else ""
        est = a.energy_is_estimate
        rows.append((
            a.run_id, steady.covers if steady else NOT_MEASURED,
            marked(fmt(a.j_per_1k_examples, 0, unknown=NOT_MEASURED), est),
            marked(fmt(mean_w, 1, unknown=NOT_MEASURED), est),
            marked(fmt(kwh, 4, unknown=NOT_MEASURED), est), idle or "none",
            marked(fmt_usd(a.energy_usd_per_1k_examples, NOT_MEASURED), est),
            fmt_usd(a.hardware_usd_per_1k_examples),
        ))  # fmt: skip
        data.append(
            {
                "run_id": a.run_id,
                "covers": steady.covers if steady else NOT_MEASURED,
                "charged_gpus": list(a.charged_gpus),
                "gpu_attribution": a.gpu_attribution,
                "idle_gpus_mean_w": {f"gpu{i}": w for i, w in steady.idle_gpus_w} if steady else {},
            }
        )
    headers = ("Run", "What it covers", "J per 1,000 examples", "Mean power (W)", "Training energy (kWh)",
               "GPUs not charged (mean draw)", "Energy $ per 1,000 examples",
               "Hardware $ per 1,000 examples")  # fmt: skip
    note = ("Board (NVML) and package (RAPL) energy, not wall power. Only the GPUs the training used are "
            "charged; the others' draw is listed apart.")  # fmt: skip
    return Section("energy", "Energy and cost", data, (Table("Energy and cost", headers, tuple(rows), note),))
