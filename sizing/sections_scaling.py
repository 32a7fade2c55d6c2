"""The scaling section (sizing.scaling): one table per series of device counts, its JSON rows, its plot."""

from __future__ import annotations

import math

from sizing.context import ReportContext
from sizing.model import Section, Table
from sizing.money_text import life_text
from sizing.scaling import ScalingPoint, ScalingSeries, scaling_series, unmatched_counts
from sizing.text import NO_PRICE, fmt, fmt_usd

HEADERS = ("Devices", "Runs", "Examples/s", "Scaling efficiency", "J per 1,000 examples",
           "$ per 1,000 examples", "Marginal $ per 1,000 extra examples", "Payback of this step")  # fmt: skip


def scaling_section(ctx: ReportContext) -> Section:
    prices = ctx.settings.prices
    series = scaling_series(ctx.runs, ctx.analyses, prices)
    life = life_text(prices)
    tables = [_table(s, life) for s in series]
    unmatched = unmatched_counts(ctx.runs, ctx.analyses)
    if unmatched:
        rows = tuple(tuple(line.split(": ", 1)) for line in unmatched)
        tables.append(Table("Scaling: many-device runs not lined up", ("Run", "Why"), rows))
    lines = [_verdict_line(s, life) for s in series] + unmatched
    data = {
        "series": [
            {
                "name": s.name,
                "kind": s.kind,
                "devices": s.devices,
                "per_device_batch": s.per_device_batch,
                "sweep_ids": list(s.sweep_ids),
                "largest_count_paying_back": s.largest_paying_count,
                "rows": [_json_row(p) for p in s.points],
            }
            for s in series
        ],
        "notes": lines,
    }
    return Section("scaling", "Scaling with the device count", data, tuple(tables), tuple(lines))


def _table(series: ScalingSeries, life: str) -> Table:
    rows = tuple(
        (
            str(p.count),
            ", ".join(p.run_ids),
            fmt(p.examples_per_s),
            fmt(p.efficiency * 100, 0, " %") if p.efficiency is not None else "n/a (no 1-device run)",
            fmt(p.j_per_1k_examples, 0, unknown="not measured"),
            fmt_usd(p.total_usd_per_1k),
            "" if p.count == series.points[0].count else _marginal(p),
            "" if p.count == series.points[0].count else _payback(p, life),
        )
        for p in series.points
    )
    note = (
        f"{_verdict_line(series, life)}. {series.devices.capitalize()} of one node; efficiency = "
        f"examples/s(N) / (N × examples/s(1)); hardware: the host + the GPUs used over the {life}"
    )
    return Table(f"Scaling: {series.name}", HEADERS, rows, note)


def _marginal(point: ScalingPoint) -> str:
    if point.marginal_usd_per_1k == math.inf:
        return "n/a (no extra throughput)"
    return fmt_usd(point.marginal_usd_per_1k, "n/a (needs prices)")


def _payback(point: ScalingPoint, life: str) -> str:
    if point.payback_hours is None:
        return "n/a (needs --gpu-price and --value-per-hour or measured energy)"
    if math.isinf(point.payback_hours):
        return "never"
    if point.payback_hours == 0:
        return "at once (no extra hardware)"
    within = "within" if point.pays_back else "beyond"
    return f"{point.payback_hours:,.0f} h ({within} the {life})"


def _verdict_line(series: ScalingSeries, life: str) -> str:
    if series.largest_paying_count is None:
        return f"Largest count that pays back: unknown ({NO_PRICE}, or no value per hour nor energy)"
    return (
        f"Largest count whose every step pays back within the {life}: "
        f"{series.largest_paying_count} {series.devices}"
    )


def _finite(value: float | None) -> float | None:
    return None if value is None or math.isinf(value) else value


def _json_row(point: ScalingPoint) -> dict:
    return {
        "count": point.count,
        "run_ids": list(point.run_ids),
        "examples_per_s": point.examples_per_s,
        "scaling_efficiency": point.efficiency,
        "energy_j_per_1000_examples": point.j_per_1k_examples,
        "energy_usd_per_1000_examples": point.energy_usd_per_1k,
        "hardware_usd_per_1000_examples": point.hardware_usd_per_1k,
        "total_usd_per_1000_examples": point.total_usd_per_1k,
        "marginal_usd_per_1000_extra_examples": _finite(point.marginal_usd_per_1k),
        "adds_no_throughput": point.marginal_usd_per_1k == math.inf,
        "payback_hours": _finite(point.payback_hours),
        "never_pays_back": point.payback_hours == math.inf,
        "pays_back_within_life": point.pays_back,
    }


def scaling_figure(section: Section):  # type: ignore[no-untyped-def]
    """examples/s against device count per series, with the ideal linear line; None without series."""
    import plotly.graph_objects as go

    series = section.data.get("series") if isinstance(section.data, dict) else None
    if not series:
        return None
    figure = go.Figure()
    for s in series:
        rows = [r for r in s["rows"] if r["examples_per_s"] is not None]
        figure.add_trace(
            go.Scatter(
                x=[r["count"] for r in rows], y=[r["examples_per_s"] for r in rows],
                mode="lines+markers", name=s["name"],
            )
        )  # fmt: skip
        one = next((r["examples_per_s"] for r in rows if r["count"] == 1), None)
        if one:
            figure.add_trace(
                go.Scatter(
                    x=[r["count"] for r in rows], y=[one * r["count"] for r in rows], mode="lines",
                    line={"dash": "dot"}, name=f"ideal (N × 1 device) · {s['name']}",
                )
            )  # fmt: skip
    figure.update_layout(
        title="Throughput against device count", xaxis_title="devices", yaxis_title="examples/s", height=380
    )
    return figure
