"""The "Sizing" tab: is the GPU worth it, for the runs selected in the picker.

`layout()` builds the form (tariff, prices, thresholds) and an empty result area; `register` wires the
form and the run picker to dashboard.sizing_view's `sizing_content` and to the report downloads.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dash
from dash import Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

from dashboard.sizing_view import FIELDS, download_payload, sizing_content
from dashboard.tabs.base import PICKER_ID, TABS_ID, Tab

TAB_VALUE = "sizing"
RESULT_ID = "sizing-result"
DOWNLOAD_ID = "sizing-download"
DOWNLOAD_HTML_ID = "sizing-download-html"
DOWNLOAD_MD_ID = "sizing-download-md"
FORM_STYLE = {"display": "flex", "flexWrap": "wrap", "gap": "0.5em 1.5em", "margin": "0.5em 0 1em"}
FIELD_STYLE = {"display": "flex", "flexDirection": "column", "fontSize": "0.9em"}


def field_id(name: str) -> str:
    return f"sizing-{name}"


def layout() -> Any:
    """The Sizing page: the form and an empty result area (no data is read here)."""
    inputs = [
        html.Label(
            [
                html.Span(label),
                dcc.Input(
                    id=field_id(name), type="number", value=default, step=step, min=minimum, debounce=True
                )
                if step is not None
                else dcc.Input(id=field_id(name), type="text", value=default or "", debounce=True),
            ],
            className="sizing-field",
            style=FIELD_STYLE,
        )
        for name, label, default, step, minimum in FIELDS
    ]
    downloads = [
        html.Button("Download report (HTML)", id=DOWNLOAD_HTML_ID, n_clicks=0),
        html.Button("Download report (Markdown)", id=DOWNLOAD_MD_ID, n_clicks=0),
        dcc.Download(id=DOWNLOAD_ID),
    ]
    return html.Div(
        [
            html.H2("Is the GPU worth it?"),
            html.P(
                "Speedup, energy and cost per 1,000 examples, break-even and bottleneck verdicts for the "
                "runs selected above, like-for-like where the workloads match (python -m sizing).",
                className="hint",
            ),
            html.Div(inputs, className="sizing-form", style=FORM_STYLE),
            html.Div(downloads, className="sizing-downloads", style=FORM_STYLE),
            dcc.Loading(html.Div(id=RESULT_ID)),
        ],
        className="sizing",
    )


def register(app: dash.Dash, data_dir: Path, _max_points: int = 0) -> None:
    """Wire the picker and the form to the result area and the downloads."""
    form = [Input(field_id(name), "value") for name, *_ in FIELDS]

    @app.callback(Output(RESULT_ID, "children"), Input(TABS_ID, "value"), Input(PICKER_ID, "value"), *form)
    def _show(tab: str | None, run_ids: Sequence[str] | None, *values: float | None) -> list[Any]:
        if tab != TAB_VALUE:
            raise PreventUpdate  # hidden: switching to the tab renders it with the current selection
        return sizing_content(data_dir, run_ids, values)

    @app.callback(
        Output(DOWNLOAD_ID, "data"),
        Input(DOWNLOAD_HTML_ID, "n_clicks"),
        Input(DOWNLOAD_MD_ID, "n_clicks"),
        State(PICKER_ID, "value"),
        *[State(field_id(name), "value") for name, *_ in FIELDS],
        prevent_initial_call=True,
    )
    def _download(_html: int, _md: int, run_ids: Sequence[str] | None, *values: float | None) -> Any:
        kind = "markdown" if dash.ctx.triggered_id == DOWNLOAD_MD_ID else "html"
        return download_payload(data_dir, run_ids, values, kind) or dash.no_update


TAB = Tab(TAB_VALUE, "Sizing", layout, register)
