"""How energy, cost and break-even read in the headline and the tables: a figure that cannot be trusted
says so in the same phrase, or is not shown; assumptions stand beside the figure."""

from __future__ import annotations

import re

from sizing.analysis.compare import Comparison, Group
from sizing.analysis.energy import not_attributable_text
from sizing.context import ReportContext
from sizing.model import Prices
from sizing.text import ESTIMATE, NO_PRICE, NOT_MEASURED, fmt, fmt_usd, marked


def _short(covers: str) -> str:
    """'GPU board (NVML energy counter) + CPU package (RAPL)' → 'GPU board + CPU package'."""
    return re.sub(r" \([^()]*\)", "", covers).replace("ESTIMATE: ", "estimated ")


NO_EXAMPLES = "no work counter: examples/s unknown"
STEPS_ONLY = "examples per step not known: examples/s unknown"
NOT_TIMED = "steps not timed: examples/s unknown"


def energy_unknown_reason(g: Group) -> str:
    """Why the group has no energy figure: the first run's reason ('GPU board not reported', 'gpu0
    covers 90% of the run', 'no work counter', ...)."""
    for a in g.analyses:
        energy = a.steady_energy or a.training_energy
        if energy is not None and energy.total_j is None:
            return energy.missing
        if a.throughput.examples_per_s is None:
            if a.throughput.not_timed:
                return NOT_TIMED
            return STEPS_ONLY if a.throughput.steps_per_s else NO_EXAMPLES
        if energy is None:
            return "no telemetry in the training window"
    return "no throughput to divide by"


def energy_unknown_word(reason: str) -> str:
    """How an unknown energy figure reads: not attributable (measured, not the run's), unknown (measured,
    but no examples to divide it by), or not measured."""
    if "not attributable" in reason:
        return "not attributable"
    return "unknown" if reason in (NO_EXAMPLES, STEPS_ONLY, NOT_TIMED) else NOT_MEASURED


def energy_phrase(g: Group) -> str:
    """'17,500 J', '17,500 J (GPU board only: CPU not measured)', 'energy not measured (GPU board not
    reported)'; repeats with energy in only some runs say in how many."""
    if g.j_per_1k_examples.mean is None:
        reason = energy_unknown_reason(g)
        if "not attributable" in reason:  # measured, but not the run's: a shared GPU, a MIG slice
            return not_attributable_text(reason)
        return f"energy {energy_unknown_word(reason)} ({reason})"
    text = fmt(g.j_per_1k_examples.mean, 0, " J")
    notes = []
    if any(a.steady_energy is not None and a.steady_energy.is_partial for a in g.analyses):
        notes.append("GPU board only: CPU not measured")
    if g.j_per_1k_examples.count < len(g.analyses):
        notes.append(f"measured in {g.j_per_1k_examples.count} of {len(g.analyses)} runs")
    text = marked(text, g.energy_is_estimate)
    return f"{text} ({'; '.join(notes)})" if notes else text


def hardware_missing(g: Group, prices: Prices) -> str:
    missing = g.first.hardware_price.missing
    if (
        prices.gpu_price is None
        and prices.cpu_price is None
        and not (prices.gpu_price_by_model or prices.host_price_by_host)
    ):
        return f"hardware: {NO_PRICE}"
    return missing or "hardware not priced"


def life_text(prices: Prices) -> str:
    return f"{prices.amortise_years:g}-year life at {prices.utilisation:.0%} use"


def cost_phrase(g: Group, prices: Prices) -> str:
    """The cost per 1,000 examples, or what it covers when a price or the energy is missing."""
    energy_usd, hardware_usd = g.energy_usd_per_1k.mean, g.hardware_usd_per_1k.mean
    if g.total_usd_per_1k.mean is not None:
        return marked(f"{fmt_usd(g.total_usd_per_1k.mean)} (energy + hardware over a {life_text(prices)})",
                      g.energy_is_estimate)  # fmt: skip
    if energy_usd is not None:
        return marked(
            f"{fmt_usd(energy_usd)}, energy only ({hardware_missing(g, prices)})", g.energy_is_estimate
        )
    if prices.tariff_per_kwh is None and hardware_usd is None:
        return f"cost n/a ({NO_PRICE})"
    unknown = energy_unknown_word(energy_unknown_reason(g))
    if hardware_usd is not None:
        return f"{fmt_usd(hardware_usd)}, hardware only (energy {unknown})"
    if g.j_per_1k_examples.mean is None:
        return f"cost n/a (energy {unknown})"
    return f"cost n/a ({NO_PRICE})"


def money_phrase(g: Group, prices: Prices) -> str:
    return f"{energy_phrase(g)} and {cost_phrase(g, prices)} per 1,000 examples"


def attribution_note(g: Group) -> str:
    """The headline's warning when a GPU run does not say which GPUs trained ('' when it does)."""
    unknown = [a for a in g.analyses if not a.gpu_attribution_known]
    if not unknown:
        return ""
    return (
        f" — energy and price charged for {unknown[0].gpu_attribution.split(' (')[0]}: "
        "the run does not say which GPUs trained"
    )


def energy_doubt(g: Group) -> str:
    """The first disagreement between a GPU's energy counter and its integrated power ('' when none;
    resets are in the warnings)."""
    checks = [c for a in g.analyses if a.steady_energy for c in a.steady_energy.checks if "differ by" in c]
    return checks[0] if checks else ""


def energy_checks_note(g: Group) -> str:
    """The headline's note when a GPU counter and its power disagree."""
    return f" — energy doubtful: {doubt}" if (doubt := energy_doubt(g)) else ""


def assumptions(c: Comparison, ctx: ReportContext) -> str:
    prices, base = ctx.settings.prices, ctx.baseline
    value = (
        f"an hour saved worth {fmt_usd(prices.value_per_hour)}"
        if prices.value_per_hour is not None
        else "time saved not valued (--value-per-hour)"
    )
    parts = [f"{life_text(prices)} (--amortise-years, --utilisation)", value]
    if c.energy_saving_per_gpu_hour is None:
        parts.append("energy not counted (not measured on both sides)")
    elif base is not None:
        side = c.group.first.steady_energy
        other = base.first.steady_energy
        if side is not None and other is not None:
            parts.append(f"energy {_short(side.covers)} vs {_short(other.covers)}")
    return "; ".join(parts)


def break_even_text(c: Comparison, ctx: ReportContext) -> str:
    """The headline's break-even, with its assumptions beside it."""
    even = c.break_even
    if even is None:
        return "break-even: n/a"
    if even.hours is None:
        text = f"break-even: {even.reason}"
        return f"{text} ({assumptions(c, ctx)})" if even.hours_beyond_life is not None else text
    if even.hours == 0:
        return f"break-even at once: the GPU side {even.investment_text} ({assumptions(c, ctx)})"
    base_hours = even.hours * c.speedup if c.speedup else None
    text = (
        f"the GPU pays back {even.investment_text} after {fmt(even.hours, 1)} GPU training hours "
        f"(≈ {fmt(base_hours, 1)} hours of baseline training; {assumptions(c, ctx)})"
    )
    return f"{text} ({ESTIMATE})" if even.is_estimate else text


def break_even_cell(c: Comparison) -> str:
    even = c.break_even
    if even is None:
        return "n/a"
    if even.hours is None:
        return f"n/a ({even.reason})"
    return marked(fmt(even.hours, 1), even.is_estimate)
