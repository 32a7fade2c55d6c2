"""The scaling section (analysis.scaling): one table per series of device counts, its JSON rows, its plot."""

from __future__ import annotations

import math

from sizing.analysis import money
from sizing.analysis.scaling import (
    ScalingPoint,
    ScalingSeries,
    count_text,
    left_out_runs,
    scaling_series,
    unmatched_counts,
)
from sizing.context import ReportContext
from sizing.model import Section, Table
from sizing.sections.money_text import life_text
from sizing.text import NO_PRICE, fmt, fmt_usd

HEADERS = ("Devices", "Runs", "Examples/s", "Scaling efficiency", "J per 1,000 examples",
           "$ per 1,000 examples", "Marginal $ per 1,000 extra examples", "Payback of this step")  # fmt: skip


def scaling_section(ctx: ReportContext) -> Section:
    prices, include = ctx.settings.prices, ctx.settings.include_incomplete
    series = scaling_series(ctx.runs, ctx.analyses, prices, include)
    life = life_text(prices)
    tables = [_table(s, life) for s in series]
    unmatched = unmatched_counts(ctx.runs, ctx.analyses, include)
    left_out = [] if include else left_out_runs(ctx.runs, ctx.analyses)
    for title, found in (
        ("many-device runs not lined up", unmatched),
        ("runs left out as incomplete", left_out),
    ):
        if found:
            rows = tuple(tuple(line.split(": ", 1)) for line in found)
            tables.append(Table(f"Scaling: {title}", ("Run", "Why"), rows))
    lines = [verdict_line(s, life) for s in series] + unmatched + left_out
    data = {
        "series": [
            {
                "name": s.name,
                "kind": s.kind,
                "devices": s.devices,
                "per_device_batch": s.per_device_batch,
                "sweep_ids": list(s.sweep_ids),
                "largest_count_paying_back": s.largest_paying_count,
                "verdict": verdict_line(s, life),
                "stopped_at_count": s.stopped_at,
                "left_out_incomplete": list(s.left_out),
                "rows": [_json_row(p) for p in s.points],
            }
            for s in series
        ],
        "notes": lines,
    }
    return Section("scaling", "Scaling with the device count", data, tuple(tables), tuple(lines))


def _table(series: ScalingSeries, life: str) -> Table:
    first = series.points[0].count
    rows = tuple(
        (
            _devices_cell(p),
            _runs_cell(p),
            fmt(p.examples_per_s),
            fmt(p.efficiency * 100, 0, " %")
            if p.efficiency is not None
            else "n/a (no complete 1-device run)",
            fmt(p.j_per_1k_examples, 0, unknown="not measured"),
            fmt_usd(p.total_usd_per_1k),
            "" if p.count == first else _marginal(p),
            "" if p.count == first else _payback(p, life),
        )
        for p in series.points
    )
    devices = series.devices[0].upper() + series.devices[1:]
    note = (
        f"{verdict_line(series, life)}. {devices} of one node; efficiency = "
        f"examples/s(N) / (N × examples/s(1)); hardware: the host + the GPUs used over the {life}"
    )
    return Table(f"Scaling: {series.name}", HEADERS, rows, note)


def _runs_cell(point: ScalingPoint) -> str:
    why = dict(entry.split(": ", 1) for entry in point.incomplete)
    return ", ".join(f"{r} (INCOMPLETE: {why[r]})" if r in why else r for r in point.run_ids)


def _devices_cell(point: ScalingPoint) -> str:
    if not point.judged:
        return f"{point.count} (incomplete runs only: not judged)"
    return f"{point.count} (an incomplete run averaged in)" if point.incomplete else str(point.count)


def _marginal(point: ScalingPoint) -> str:
    if not point.judged:
        return "n/a (not judged)"
    if point.marginal_usd_per_1k == math.inf:
        return "n/a (no extra throughput)"
    return fmt_usd(point.marginal_usd_per_1k, "n/a (needs prices)")


def _payback(point: ScalingPoint, life: str) -> str:
    if not point.judged:
        return "not judged: measured only by incomplete runs"
    verdict, hours = point.payback_verdict, point.payback_hours
    if verdict is None or verdict == money.CANNOT_TELL:
        return point.payback_note if verdict else f"n/a ({point.payback_note})"
    if verdict == money.NEVER:
        return f"never (it saves nothing: {point.payback_note})"
    if hours == 0:
        return "at once (no extra hardware)"
    bound = f"{point.payback_bound} " if point.payback_bound else ""
    if verdict == money.BEYOND_LIFE:
        return f"{bound}{hours:,.0f} h needed: does not pay back within the {life} ({point.payback_note})"
    unvalued = ", on the energy alone: time saved not valued" if point.payback_bound else ""
    return f"{bound}{hours:,.0f} h (within the {life}{unvalued})"


def verdict_line(series: ScalingSeries, life: str) -> str:
    """The series' verdict: the largest count whose every step pays back, what stopped it, and which
    counts it could not judge."""
    devices = series.devices
    stop = next((p for p in series.points if p.count == series.stopped_at), None)
    unjudged = [p for p in series.points if not p.judged]
    tail = []
    if unjudged:
        tail.append(
            "not judged (incomplete runs only): " + ", ".join(count_text(p.count, devices) for p in unjudged)
        )
    if series.left_out:
        tail.append(f"left out as incomplete: {'; '.join(series.left_out)}")
    after = f" ({'; '.join(tail)})" if tail else ""
    if stop is not None and series.largest_paying_count is None:
        step = (
            f"the step from {count_text(stop.step_from or 0, devices)} to {count_text(stop.count, devices)}"
        )
        why = stop.payback_note or NO_PRICE
        if why.startswith(money.UNVALUED):
            return (
                f"Largest count that pays back: {money.UNVALUED} at {step}{why[len(money.UNVALUED) :]}{after}"
            )
        return f"Largest count that pays back: cannot tell at {step} ({why}){after}"
    if series.largest_paying_count is None:
        few = "fewer than two counts measured by complete runs"
        return f"Largest count that pays back: cannot tell ({few}){after}"
    line = (
        f"Largest count whose every step pays back within the {life}: "
        f"{count_text(series.largest_paying_count, devices)}"
    )
    if stop is not None:
        step = f"the step to {count_text(stop.count, devices)}"
        if stop.payback_verdict == money.NEVER:
            line += f"; {step} never pays back (it saves nothing: {stop.payback_note})"
        else:
            line += f"; {step} does not pay back within it ({stop.payback_note})"
    elif unjudged or series.left_out:
        line += ", the largest count measured by a complete run"
    return line + after


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
        "complete": not point.incomplete,
        "judged": point.judged,
        "incomplete_runs": list(point.incomplete),
        "payback_verdict": point.payback_verdict,
        "payback_bound": point.payback_bound or None,
        "payback_note": point.payback_note or None,
        "step_from_count": point.step_from,
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
