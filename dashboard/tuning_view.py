"""What the "Tuning" tab shows (its layout and callbacks: dashboard.tabs.tuning): a `--tune` sweep's trials
together, from run.json's `tuning` tag (runformat.tuning, docs/tuning.md).

The final run's `tuning.trials` says each trial's outcome; the trials' own run directories, where present,
give clickable run ids. A sweep without a final run (stopped, or still tuning) shows its trials from their
own run.json and training.json, unjudged. A trial without a measured rate has no bar: unknown is not zero.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from dash import dcc, html

from dashboard.cells import NA, hint
from dashboard.runs import RunInfo, discover_runs, files_signature
from runformat.tuning import FAILED, FINAL, HARMED, OK, TOO_SHORT, TRIAL, Setting, TrialOutcome

RUN_LINK = "tuning-run"  # the pattern-matching id type of a trial's clickable run id
GRAPH_CONFIG = {"displaylogo": False, "responsive": True}
NO_SWEEP = (
    "No tuning sweep in the data dir. A `--tune` run makes one: a few short trials, then the final run at "
    "the best setting, e.g. ./scripts/collect_gpu.sh 10m --tune (docs/tuning.md)."
)
NO_FINAL = "no final run (stopped or still tuning)"
NOT_JUDGED = "not judged"  # a trial of a sweep without a final run: only the final run judges
YOURS, CHOSEN = "your setting", "chosen"
COLORS = {YOURS: "#1f77b4", CHOSEN: "#2ca02c", FINAL: "#ff7f0e", OK: "#9aa5b1"}
HATCHED = (HARMED, TOO_SHORT, NOT_JUDGED)
TABLE_HEADERS = ("trial", "run", "setting", "outcome", "reason", "examples/s", "steady s")


@dataclass(frozen=True)
class Sweep:
    """The runs in the data dir that carry one sweep id."""

    id: str
    runs: tuple[RunInfo, ...]

    @property
    def trials(self) -> list[RunInfo]:
        found = [run for run in self.runs if run.tuning and run.tuning.role == TRIAL]
        return sorted(found, key=lambda run: (run.tuning.position if run.tuning else 0, run.run_id))

    @property
    def final(self) -> RunInfo | None:
        """The final run; the newest one if a data dir holds several (a copied run, a rerun)."""
        finals = [run for run in self.runs if run.tuning and run.tuning.role == FINAL]
        return max(finals, key=lambda run: (run.start_unix or 0.0, run.run_id), default=None)

    @property
    def start_unix(self) -> float:
        return min((run.start_unix for run in self.runs if run.start_unix is not None), default=0.0)


@dataclass(frozen=True)
class TrialRow:
    """One line of the sweep's table and one bar of its chart (a trial, or the final run)."""

    label: str  # `#0`, `#1`, …, `final`
    run_id: str | None
    present: bool  # its run directory is in the data dir
    setting: str
    outcome: str
    reason: str | None
    examples_per_s: float | None  # None: not measured (a failed trial, or no rate yet)
    steady_s: float | None
    marks: tuple[str, ...] = ()  # YOURS, CHOSEN


def find_sweeps(runs: Sequence[RunInfo]) -> list[Sweep]:
    """Every sweep among the runs, the newest first (by its first run's start)."""
    grouped: dict[str, list[RunInfo]] = {}
    for run in runs:
        if run.tuning is not None:
            grouped.setdefault(run.tuning.id, []).append(run)
    sweeps = [Sweep(sweep_id, tuple(members)) for sweep_id, members in grouped.items()]
    return sorted(sweeps, key=lambda sweep: (sweep.start_unix, sweep.id), reverse=True)


def tag_text(run: RunInfo) -> str:
    """`trial 2 of sweep ID`, `trial 0 (your setting) of sweep ID`, `final of sweep ID`; '' if none."""
    tag = run.tuning
    if tag is None:
        return ""
    if tag.role == FINAL:
        return f"final of sweep {tag.id}"
    yours = " (your setting)" if tag.position == 0 else ""
    return f"trial {tag.position}{yours} of sweep {tag.id}"


def trial_rows(sweep: Sweep) -> list[TrialRow]:
    """The sweep's trials in order, then its final run; outcomes from the final run's `tuning.trials`."""
    final = sweep.final
    tag = final.tuning if final is not None else None
    present = {run.run_id: run for run in sweep.runs}
    if tag is not None and tag.trials:
        judged = [_judged_row(index, trial, present) for index, trial in enumerate(tag.trials)]
    else:
        judged = [_unjudged_row(run) for run in sweep.trials]
    chosen = tag.setting if tag is not None else None
    chosen_index = next((i for i, (row, s) in enumerate(judged) if s == chosen and row.outcome == OK), None)
    rows = [
        replace(row, marks=(YOURS,) * (row.label == "#0") + (CHOSEN,) * (index == chosen_index))
        for index, (row, _) in enumerate(judged)
    ]
    if final is not None and tag is not None:
        rate = final.training_record.steady_examples_per_s
        rows.append(
            TrialRow(FINAL, final.run_id, True, tag.setting.text(), FINAL, tag.chosen_why, rate, None)
        )
    return rows


def _judged_row(index: int, trial: TrialOutcome, present: dict[str, RunInfo]) -> tuple[TrialRow, Setting]:
    """A trial as the final run recorded it; a rate it lacks comes from its own run, unless it failed."""
    run = present.get(trial.run_id) if trial.run_id else None
    rate = None if trial.outcome == FAILED else trial.examples_per_s
    if rate is None and trial.outcome != FAILED and run is not None:
        rate = run.training_record.steady_examples_per_s
    label = f"#{run.tuning.position}" if run is not None and run.tuning is not None else f"#{index}"
    row = TrialRow(
        label,
        trial.run_id,
        run is not None,
        trial.setting.text(),
        trial.outcome,
        trial.reason,
        rate,
        trial.steady_s,
    )
    return row, trial.setting


def _unjudged_row(run: RunInfo) -> tuple[TrialRow, Setting]:
    """A trial as its own files say, when no final run judged it: failed only if its training says so."""
    tag, training = run.tuning, run.training_record
    assert tag is not None
    outcome, reason, rate = NOT_JUDGED, f"training {training.status}" if training.status else None, None
    if training.status == "failed":
        lines = (training.error or "").strip().splitlines()
        outcome, reason = FAILED, lines[0] if lines else "training failed"
    else:
        rate = training.steady_examples_per_s
    return TrialRow(
        f"#{tag.position}", run.run_id, True, tag.setting.text(), outcome, reason, rate, None
    ), tag.setting


# ------------------------------------------------------------------------------------------ components


def sweep_choices(data_dir: Path, current: str | None) -> tuple[list[dict[str, str]], str | None, str]:
    """The sweep picker's options (newest first), its value (the current sweep if still there, else the
    newest) and a signature that changes exactly when the sweeps or their runs do, or a file of the picked
    sweep's runs (only the picked sweep is shown, so only its files are signed on each refresh tick)."""
    sweeps = find_sweeps(discover_runs(data_dir))
    options = [{"label": _option_label(sweep), "value": sweep.id} for sweep in sweeps]
    ids = [sweep.id for sweep in sweeps]
    value = current if current in ids else (ids[0] if ids else None)
    picked = next((sweep for sweep in sweeps if sweep.id == value), None)
    parts = [
        [(sweep.id, [run.run_id for run in sweep.runs]) for sweep in sweeps],
        [(run.run_id, files_signature(run)) for run in picked.runs] if picked else [],
    ]
    return options, value, hashlib.sha1(json.dumps(parts).encode()).hexdigest()


def tuning_content(data_dir: Path, sweep_id: str | None) -> list[Any]:
    """The Tuning tab's content for one sweep: what it chose and why, its trials' table and chart."""
    sweeps = find_sweeps(discover_runs(data_dir))
    if not sweeps:
        return [hint(NO_SWEEP)]
    sweep = next((s for s in sweeps if s.id == sweep_id), None)
    if sweep is None:
        return [hint("Pick a sweep above.")]
    rows = trial_rows(sweep)
    parts: list[Any] = [html.H3(f"Sweep {sweep.id}"), *_summary(sweep), trials_table(rows)]
    missing = [row.run_id or row.label for row in rows if not row.present]
    if missing:
        parts.append(hint(f"Not in the data dir (outcome from the final run only): {', '.join(missing)}."))
    parts.append(
        dcc.Graph(
            figure=trials_figure(sweep.id, rows), id="tuning-graph", config=GRAPH_CONFIG, className="graph"
        )
    )
    return parts


def _summary(sweep: Sweep) -> list[Any]:
    final = sweep.final
    first = final or (sweep.trials[0] if sweep.trials else sweep.runs[0])
    tag = first.tuning
    assert tag is not None
    lines = [f"{first.device} · {first.framework} · {first.host} · your setting: {tag.user_setting.text()}"]
    if final is None:
        lines.append(f"{NO_FINAL}: the trials below are shown from their own files, not judged.")
    else:
        lines.append(f"Chosen: {tag.setting.text()} — {tag.chosen_why or 'why: not recorded'}")
    return [html.P(line) for line in lines]


def trials_table(rows: Sequence[TrialRow]) -> Any:
    body = []
    for row in rows:
        run: Any = NA
        if row.run_id and row.present:
            run = html.Button(
                row.run_id,
                id={"type": RUN_LINK, "run": row.run_id},
                n_clicks=0,
                title="add this run to the picker",
                className="run-link",
                style=_LINK_STYLE,
            )
        elif row.run_id:
            run = f"{row.run_id} (not in the data dir)"
        label = row.label + "".join(f" · {mark}" for mark in row.marks)
        cells = [
            label,
            run,
            row.setting,
            row.outcome,
            row.reason or "",
            _rate(row.examples_per_s),
            _rate(row.steady_s),
        ]
        body.append(html.Tr([html.Td(cell) for cell in cells]))
    return html.Table(
        [html.Thead(html.Tr([html.Th(h) for h in TABLE_HEADERS])), html.Tbody(body)],
        className="grid tuning-trials",
    )


_LINK_STYLE = {
    "background": "none",
    "border": "none",
    "padding": 0,
    "color": "#1a5fb4",
    "textDecoration": "underline",
    "cursor": "pointer",
    "font": "inherit",
}


def trials_figure(sweep_id: str, rows: Sequence[TrialRow]) -> go.Figure:
    """Examples/s per trial and the final run; a trial without a rate gets a label there, never a bar."""
    labels = [row.label for row in rows]
    figure = go.Figure(
        go.Bar(
            x=labels,
            y=[row.examples_per_s for row in rows],
            text=[_bar_text(row) for row in rows],
            textposition="outside",
            cliponaxis=False,
            customdata=[[row.setting, row.outcome, row.reason or ""] for row in rows],
            hovertemplate="%{x}: %{customdata[0]}<br>%{y:.4g} examples/s · %{customdata[1]}"
            " %{customdata[2]}<extra></extra>",
            marker={
                "color": [_color(row) for row in rows],
                "pattern": {"shape": ["/" if row.outcome in HATCHED else "" for row in rows]},
            },
            name="examples/s",
        )
    )
    for row in rows:
        if row.examples_per_s is None:
            figure.add_annotation(
                x=row.label,
                y=0,
                yanchor="bottom",
                showarrow=False,
                textangle=-90,
                text=_unmeasured_text(row),
                font={"color": "#a61e4d"},
            )
    figure.update_layout(
        title=f"Steady examples/s per trial · sweep {sweep_id}",
        height=420,
        margin={"t": 60, "l": 60, "r": 20, "b": 40},
        showlegend=False,
        xaxis={"type": "category", "categoryorder": "array", "categoryarray": labels},
        yaxis={"title": "examples/s", "rangemode": "tozero"},
    )
    return figure


def select_run(selection: Sequence[str] | None, run_id: str) -> list[str]:
    """The picker's selection with `run_id` added (at the end, once)."""
    current = [r for r in (selection or []) if isinstance(r, str)]
    return current if run_id in current else [*current, run_id]


def _bar_text(row: TrialRow) -> str:
    if row.examples_per_s is None:
        return ""
    notes = list(row.marks) + ([row.outcome] if row.outcome in HATCHED else [])
    return ", ".join(notes)


def _unmeasured_text(row: TrialRow) -> str:
    if row.outcome == FAILED:
        return f"failed: {row.reason}" if row.reason else "failed"
    return f"{row.outcome}: not measured"


def _color(row: TrialRow) -> str:
    if row.outcome == FINAL:
        return COLORS[FINAL]
    if CHOSEN in row.marks:
        return COLORS[CHOSEN]
    return COLORS[YOURS] if YOURS in row.marks else COLORS[OK]


def _rate(value: float | None) -> str:
    return f"{value:.4g}" if value is not None else NA


def _option_label(sweep: Sweep) -> str:
    first = min(sweep.runs, key=lambda run: (run.start_unix is None, run.start_unix or 0.0))
    count = len(sweep.final.tuning.trials) if sweep.final and sweep.final.tuning else len(sweep.trials)
    ending = "final run" if sweep.final else NO_FINAL
    start = first.start_utc or "start unknown"
    trials = f"{count} trial" + ("s" if count != 1 else "")
    return " · ".join([sweep.id, first.device, first.host, start, trials, ending])
