"""The "Time series" tab: any one recorded metric of the selected runs, refined server-side on zoom."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dash
from dash import Input, Output, State, ctx, dcc
from dash.exceptions import PreventUpdate

from dashboard import figures, timebase, views
from dashboard.tabs.base import PICKER_ID, TABS_ID, WINDOW_ID, X_MODE_ID, Tab, only_on, register_choices

TAB_VALUE = "timeseries"
METRIC_ID = "metric"
GRAPH_ID = "timeseries-graph"


def layout() -> list[Any]:
    return [
        dcc.Dropdown(id=METRIC_ID, placeholder="metric", clearable=False, className="metric"),
        dcc.Graph(id=GRAPH_ID, config=views.GRAPH_CONFIG, figure=figures.empty_figure("")),
    ]


def register(app: dash.Dash, data_dir: Path, max_points: int = timebase.MAX_POINTS) -> None:
    register_choices(app, data_dir, METRIC_ID, views.metric_choices)

    @app.callback(
        Output(GRAPH_ID, "figure"),
        Input(TABS_ID, "value"),
        Input(METRIC_ID, "value"),
        Input(X_MODE_ID, "value"),
        Input(WINDOW_ID, "value"),
        Input(GRAPH_ID, "relayoutData"),
        State(PICKER_ID, "value"),
        prevent_initial_call=True,
    )
    def timeseries(
        tab: str,
        column: str | None,
        x_mode: str,
        window: list[float],
        relayout: dict | None,
        run_ids: list[str] | None,
    ) -> Any:
        only_on(tab, TAB_VALUE)
        zoom = relayout if ctx.triggered_id == GRAPH_ID else None
        if zoom is not None and not timebase.changes_x_range(zoom):
            raise PreventUpdate
        return views.timeseries_figure(data_dir, run_ids, column, x_mode, window, zoom, max_points)


TAB = Tab(TAB_VALUE, "Time series", layout, register)
