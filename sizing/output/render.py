"""The report as Markdown (tickets), self-contained HTML (a Jinja2 template, plotly inlined) or JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

import jinja2

from sizing.model import Table
from sizing.report import Report, to_json

TEMPLATES = Path(__file__).parent / "templates"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(table: Table) -> str:
    lines = [f"## {table.title}", ""]
    if table.rows:
        lines.append("| " + " | ".join(_md_cell(h) for h in table.headers) + " |")
        lines.append("|" + "---|" * len(table.headers))
        lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows]
        lines.append("")
    if table.note:
        lines += [table.note, ""]
    return "\n".join(lines)


def decision_markdown(report: Report) -> list[str]:
    d = report.decision
    parts = ["## Decision", ""] + ([_md_cell(d.baseline), ""] if d.baseline else [])
    parts += [f"- {_md_cell(line)}" for line in (*(o.line for o in d.options), *d.lines_without_option)]
    if d.caveats:
        parts += ["", "Caveats, the weightiest first:", ""]
        parts += [f"{i}. {_md_cell(text)}" for i, text in enumerate(d.caveats, 1)]
    if d.caveats_not_shown:
        parts += ["", f"{d.caveats_not_shown} more in the summary and sections below."]
    return [*parts, ""]


def render_markdown(report: Report) -> str:
    parts = [f"# {report.title}", "", f"Generated {report.generated_utc} from {len(report.runs)} run(s).", ""]
    parts += decision_markdown(report)
    parts += ["## Summary", ""] + [f"- {_md_cell(line)}" for line in report.headline] + [""]
    parts += [markdown_table(t) for s in report.sections for t in s.tables]
    parts += ["## Definitions", ""] + [f"- **{term}**: {text}" for term, text in report.definitions] + [""]
    if report.warnings:
        parts += ["## Warnings", ""] + [f"- {_md_cell(w)}" for w in report.warnings] + [""]
    return "\n".join(parts)


def render_html(report: Report) -> str:
    from sizing.output.figures import report_figures

    figures = [
        fig.to_html(full_html=False, include_plotlyjs=(i == 0), config={"displaylogo": False})
        for i, fig in enumerate(report_figures(report))
    ]
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, undefined=jinja2.StrictUndefined
    )
    return environment.get_template("report.html.j2").render(report=report, figures=figures)


def _json_safe(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def render_json(report: Report) -> str:
    return json.dumps(_json_safe(to_json(report)), indent=2, ensure_ascii=False, default=str) + "\n"
