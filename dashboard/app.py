"""The Dash app: the frame around the tabs of dashboard/tabs/, which bring their own layout and callbacks.

`create_app(data_dir)` builds a fresh app over the run directories under data_dir/runs and
data_dir/examples; it only reads them. The frame is the run picker, the x-axis and window controls, the
warnings, and a dcc.Interval that re-lists the runs and, when a file of a selected run changes, bumps the
`data-version` store that every tab listens to.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dash
from dash import MATCH, Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

from dashboard import timebase, views
from dashboard.runs import discover_runs
from dashboard.tabs import (
    components,
    details,
    detections,
    inference,
    sizing,
    summary,
    timeseries,
    training,
    tuning,
)
from dashboard.tabs.base import PICKER_ID, TABS_ID, VERSION_ID, WINDOW_ID, X_MODE_ID, Tab

REFRESH_MS = 5000
TITLE = "GPU workbench · run comparison"
REFRESH_ID = "refresh"
WARNINGS_ID = "run-warnings"
TABS: tuple[Tab, ...] = (
    timeseries.TAB,
    *components.TABS,
    summary.TAB,
    training.TAB,
    tuning.TAB,
    detections.TAB,
    inference.TAB,
    details.TAB,
    sizing.TAB,
)


def create_app(
    data_dir: Path, refresh_ms: int = REFRESH_MS, max_points: int = timebase.MAX_POINTS
) -> dash.Dash:
    """The app over data_dir; `max_points` per trace of the time-series views (the bench lifts it)."""
    data_dir = Path(data_dir)
    app = dash.Dash(
        __name__,
        title=TITLE,
        update_title=None,
        assets_folder=str(Path(__file__).parent / "assets"),
    )
    app.layout = lambda: layout(data_dir, refresh_ms)
    register_frame(app, data_dir, max_points)
    for tab in TABS:
        tab.register(app, data_dir, max_points)
    return app


def layout(data_dir: Path, refresh_ms: int = REFRESH_MS) -> Any:
    runs = discover_runs(data_dir)
    return html.Div(
        [
            html.Header(
                [
                    html.H1(TITLE),
                    html.Span(
                        f"runs under {data_dir / 'runs'} and {data_dir / 'examples'}", className="subtitle"
                    ),
                ]
            ),
            _controls(runs),
            html.Div(id=WARNINGS_ID, className="warnings"),
            dcc.Tabs(
                id=TABS_ID, value=TABS[0].value, children=[tab.component() for tab in TABS], className="tabs"
            ),
            dcc.Interval(id=REFRESH_ID, interval=refresh_ms),
            dcc.Store(id=VERSION_ID),
        ],
        className="page",
    )


def _controls(runs: list) -> Any:
    return html.Div(
        [
            html.Label("Runs", htmlFor=PICKER_ID),
            dcc.Dropdown(
                id=PICKER_ID,
                multi=True,
                options=views.picker_options(runs),
                value=views.default_selection(runs),
                placeholder="pick runs to compare (label · device · host · start · duration · end reason)",
            ),
            html.Div(
                [
                    html.Label("x axis"),
                    dcc.RadioItems(
                        id=X_MODE_ID,
                        options=[
                            {"label": "seconds", "value": timebase.X_SECONDS},
                            {"label": "% of runtime", "value": timebase.X_PERCENT},
                        ],
                        value=timebase.X_SECONDS,
                        inline=True,
                    ),
                    html.Label("window, % of each run's runtime"),
                    html.Div(
                        dcc.RangeSlider(
                            id=WINDOW_ID,
                            min=0,
                            max=100,
                            step=0.5,
                            value=list(timebase.FULL_WINDOW),
                            marks={p: f"{p}%" for p in range(0, 101, 10)},
                            allowCross=False,
                        ),
                        className="slider",
                    ),
                ],
                className="axis-controls",
            ),
        ],
        className="controls",
    )


def register_frame(app: dash.Dash, data_dir: Path, max_points: int = timebase.MAX_POINTS) -> None:
    """The run list and data version, the warnings, and the zoom of every time-series panel of any tab."""

    @app.callback(
        Output(PICKER_ID, "options"),
        Output(VERSION_ID, "data"),
        Input(REFRESH_ID, "n_intervals"),
        Input(PICKER_ID, "value"),
        State(VERSION_ID, "data"),
    )
    def refresh(_ticks: int | None, run_ids: list[str] | None, version: str | None) -> tuple:
        options, _ = views.listing(data_dir, run_ids)
        latest = views.selection_signature(data_dir, run_ids)
        return options, (dash.no_update if latest == version else latest)

    @app.callback(Output(WARNINGS_ID, "children"), Input(VERSION_ID, "data"), Input(PICKER_ID, "value"))
    def warnings(_version: str | None, run_ids: list[str] | None) -> list[Any]:
        return views.warnings_banner(data_dir, run_ids)

    zoomable = {"type": views.ZOOMABLE, "view": MATCH, "panel": MATCH}

    @app.callback(
        Output(zoomable, "figure"),
        Input(zoomable, "relayoutData"),
        State(zoomable, "id"),
        State(X_MODE_ID, "value"),
        State(WINDOW_ID, "value"),
        State(PICKER_ID, "value"),
        prevent_initial_call=True,
    )
    def zoom(
        relayout: dict | None, graph: dict, x_mode: str, window: list[float], run_ids: list[str] | None
    ) -> Any:
        """Every time-series panel refines itself server-side to the zoomed x range (full detail)."""
        if not relayout or not timebase.changes_x_range(relayout):
            raise PreventUpdate
        return views.zoomed_panel(
            data_dir, run_ids, graph["view"], graph["panel"], x_mode, window, relayout, max_points
        )
