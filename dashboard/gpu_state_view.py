"""Run details' GPU state: run.json's `gpu_state` (docs/run-format.md) as a table per GPU, the changes seen
during the run and the other compute processes on the board."""

from __future__ import annotations

from typing import Any

from dash import html

from dashboard.cells import NA, gib, hint, mapping, text

_STATE_ROWS = (
    "power limit",
    "application clocks",
    "MIG mode",
    "persistence / compute mode",
    "ECC",
    "PCIe link",
)


def _state_cells(s: dict[str, Any]) -> list[str]:
    """One GPU's state (run.json's gpu_state.start[i] or end[i]) as the cells of _STATE_ROWS."""

    def t(key: str, unit: str = "") -> str:
        return text(s.get(key), unit)

    limit, default = s.get("power_limit_w"), s.get("power_limit_default_w")
    below = isinstance(limit, int | float) and isinstance(default, int | float) and limit < default
    return [
        f"{t('power_limit_w', 'W')} (default {t('power_limit_default_w', 'W')}, range "
        f"{t('power_limit_min_w')}–{t('power_limit_max_w', 'W')})" + (": below the default" if below else ""),
        f"SM {t('applications_clock_sm_mhz', 'MHz')}, memory {t('applications_clock_mem_mhz', 'MHz')} "
        f"(default {t('default_applications_clock_sm_mhz')} / "
        f"{t('default_applications_clock_mem_mhz', 'MHz')})",
        t("mig_mode"),
        f"{t('persistence_mode')} / {t('compute_mode').replace('_', ' ')}",
        t("ecc_mode"),
        f"gen {t('pcie_link_gen')} of {t('pcie_link_gen_max')}, "
        f"width {t('pcie_link_width')} of {t('pcie_link_width_max')}",
    ]


def gpu_state_parts(meta: dict[str, Any]) -> list[Any]:
    """run.json's `gpu_state`: each GPU's settings at start (and at end where they differ), the board before
    the training, the changes seen during the run and the other compute processes; nothing without it."""
    state, t0 = mapping(meta.get("gpu_state")), meta.get("start_unix")
    if not state:
        return []
    start, end, before = (_by_index(state.get(key)) for key in ("start", "end", "before_training"))
    indices = sorted({*start, *end, *before})
    first = {i: _state_cells(start[i]) if i in start else [NA] * len(_STATE_ROWS) for i in indices}
    last = {i: _state_cells(end[i]) for i in end}
    rows = [
        [f"{first[i][row]} at start, {last[i][row]} at end" if last.get(i, first[i])[row] != first[i][row]
         else first[i][row] for i in indices]
        for row in range(len(_STATE_ROWS))
    ]  # fmt: skip
    rows.append(
        [
            f"{text(b.get('util_pct'), '%')} busy, {gib(b.get('mem_used_bytes'))} used, "
            f"{text(b.get('power_w'), 'W')}, {text(b.get('compute_processes'))} compute process(es)"
            if (b := before.get(i))
            else NA
            for i in indices
        ]
    )
    labels = [*_STATE_ROWS, "board before the training"]
    body = [
        html.Tr([html.Th(label), *[html.Td(cell) for cell in cells]])
        for label, cells in zip(labels, rows, strict=True)
    ]
    header = html.Thead(html.Tr([html.Th("GPU"), *[html.Th(f"gpu{i}") for i in indices]]))
    changes = [
        f"{_since(c.get('time_unix'), t0)} gpu{text(c.get('index'))} {text(c.get('field'))}: "
        f"{text(c.get('from'))} → {text(c.get('to'))}"
        for c in state.get("changes") or []
        if isinstance(c, dict)
    ]
    if state.get("changes_dropped"):
        changes.append(f"{state['changes_dropped']} more changes not kept")
    others = [
        f"gpu{text(o.get('index'))}: pid {text(o.get('pid'))} ({text(o.get('name'))}), "
        f"{gib(o.get('used_memory_bytes'))} of GPU memory at most, "
        f"seen {_since(o.get('first_seen_unix'), t0)} to {_since(o.get('last_seen_unix'), t0)}"
        for o in state.get("other_processes") or []
        if isinstance(o, dict)
    ]
    parts = [html.H5("GPU state"), html.Table([header, html.Tbody(body)], className="kv gpu-state")]
    if changes:
        parts += [html.P("Changes during the run:"), html.Ul([html.Li(c) for c in changes])]
    else:
        parts.append(hint("no change seen during the run"))
    if others:
        parts += [html.P("Other compute processes on these GPUs:"), html.Ul([html.Li(o) for o in others])]
    if state.get("processes_checked") is False:
        parts.append(hint(f"other compute processes not checked: {text(state.get('processes_reason'))}"))
    elif not others:
        parts.append(hint("no other compute process seen on these GPUs"))
    return parts


def _by_index(value: Any) -> dict[int, dict[str, Any]]:
    entries = value if isinstance(value, list) else []
    return {e["index"]: e for e in entries if isinstance(e, dict) and isinstance(e.get("index"), int)}


def _since(time_unix: Any, start_unix: Any) -> str:
    """A moment of the run as seconds after its start (the time itself where the start is unknown)."""
    if isinstance(time_unix, int | float) and isinstance(start_unix, int | float):
        return f"+{time_unix - start_unix:.0f} s"
    return text(time_unix)
