"""The Dash app: layout and thin callbacks (read inputs, call a function in dashboard.views, return).

`create_app(data_dir)` builds a fresh app over the run directories under data_dir/runs and
data_dir/examples; it only reads them. A dcc.Interval re-lists the runs and, when a file of a selected
run changes, bumps the `data-version` store that every view listens to.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dash
from dash import MATCH, Input, Output, State, ctx, dcc, html
from dash.exceptions import PreventUpdate
from flask import abort, send_file

from dashboard import detections_view, figures, gpu_side_by_side, inference_view, sizing_view, views
from dashboard.runs import discover_runs

REFRESH_MS = 5000
TITLE = "GPU workbench · run comparison"


def create_app(
    data_dir: Path, refresh_ms: int = REFRESH_MS, max_points: int = figures.MAX_POINTS
) -> dash.Dash:
    """The app over data_dir; `max_points` per trace of the time-series view (the bench lifts it)."""
    data_dir = Path(data_dir)
    app = dash.Dash(
        __name__,
        title=TITLE,
        update_title=None,
        assets_folder=str(Path(__file__).parent / "assets"),
    )
    app.layout = lambda: layout(data_dir, refresh_ms)
    register_callbacks(app, data_dir, max_points)
    sizing_view.register_callbacks(app, data_dir)
    inference_view.register_callbacks(app, data_dir)
    _register_file_route(app, data_dir)
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
            html.Div(id="run-warnings", className="warnings"),
            dcc.Tabs(id="tabs", value="timeseries", children=_tabs(), className="tabs"),
            dcc.Interval(id="refresh", interval=refresh_ms),
            dcc.Store(id="data-version"),
        ],
        className="page",
    )


def _controls(runs: list) -> Any:
    return html.Div(
        [
            html.Label("Runs", htmlFor="run-picker"),
            dcc.Dropdown(
                id="run-picker",
                multi=True,
                options=views.picker_options(runs),
                value=views.default_selection(runs),
                placeholder="pick runs to compare (label · device · host · start · duration · end reason)",
            ),
            html.Div(
                [
                    html.Label("x axis"),
                    dcc.RadioItems(
                        id="x-mode",
                        options=[
                            {"label": "seconds", "value": figures.X_SECONDS},
                            {"label": "% of runtime", "value": figures.X_PERCENT},
                        ],
                        value=figures.X_SECONDS,
                        inline=True,
                    ),
                    html.Label("window, % of each run's runtime"),
                    html.Div(
                        dcc.RangeSlider(
                            id="window",
                            min=0,
                            max=100,
                            step=0.5,
                            value=list(figures.FULL_WINDOW),
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


def _tabs() -> list[Any]:
    tabs = [
        dcc.Tab(
            label="Time series",
            value="timeseries",
            children=[
                dcc.Dropdown(id="metric", placeholder="metric", clearable=False, className="metric"),
                dcc.Graph(id="timeseries-graph", config=views.GRAPH_CONFIG, figure=figures.empty_figure("")),
            ],
        )
    ]
    tabs += [
        dcc.Tab(label=title, value=name, children=_loading(f"tab-{name}"))
        for name, title in views.COMPONENT_TABS.items()
    ]
    tabs += [
        dcc.Tab(label="Mean & peak", value="summary", children=_loading("tab-summary")),
        dcc.Tab(label="Training", value="training", children=_loading("tab-training")),
        dcc.Tab(
            label="Detections",
            value="detections",
            children=[
                dcc.Dropdown(
                    id="image-picker", placeholder="held-out image", clearable=False, className="metric"
                ),
                _loading("tab-detections"),
            ],
        ),
        inference_view.tab(),
        dcc.Tab(label="Run details", value="details", children=_loading("tab-details")),
        dcc.Tab(label="Sizing", value="sizing", children=sizing_view.layout()),
    ]
    return tabs


def _loading(content_id: str) -> Any:
    """The tab's content area, with a spinner while a long run is parsed for the first time."""
    return dcc.Loading(html.Div(id=content_id), delay_show=400, type="circle")


def register_callbacks(app: dash.Dash, data_dir: Path, max_points: int = figures.MAX_POINTS) -> None:
    @app.callback(
        Output("run-picker", "options"),
        Output("data-version", "data"),
        Input("refresh", "n_intervals"),
        Input("run-picker", "value"),
        State("data-version", "data"),
    )
    def refresh(_ticks: int | None, run_ids: list[str] | None, version: str | None) -> tuple:
        options, _ = views.listing(data_dir, run_ids)
        latest = views.selection_signature(data_dir, run_ids)
        return options, (dash.no_update if latest == version else latest)

    @app.callback(
        Output("run-warnings", "children"), Input("data-version", "data"), Input("run-picker", "value")
    )
    def warnings(_version: str | None, run_ids: list[str] | None) -> list[Any]:
        return views.warnings_banner(data_dir, run_ids)

    @app.callback(
        Output("metric", "options"),
        Output("metric", "value"),
        Input("data-version", "data"),
        State("run-picker", "value"),
        State("metric", "value"),
    )
    def metric_choices(_version: str | None, run_ids: list[str] | None, current: str | None) -> tuple:
        return views.metric_choices(data_dir, run_ids, current)

    @app.callback(
        Output("timeseries-graph", "figure"),
        Input("tabs", "value"),
        Input("metric", "value"),
        Input("x-mode", "value"),
        Input("window", "value"),
        Input("timeseries-graph", "relayoutData"),
        State("run-picker", "value"),
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
        _only_on(tab, "timeseries")
        zoom = relayout if ctx.triggered_id == "timeseries-graph" else None
        if zoom is not None and not views.changes_x_range(zoom):
            raise PreventUpdate
        return views.timeseries_figure(data_dir, run_ids, column, x_mode, window, zoom, max_points)

    for name in views.COMPONENT_TABS:
        _register_component_tab(app, data_dir, name)

    zoomable = {"type": views.ZOOMABLE, "view": MATCH, "panel": MATCH}

    @app.callback(
        Output(zoomable, "figure"),
        Input(zoomable, "relayoutData"),
        State(zoomable, "id"),
        State("x-mode", "value"),
        State("window", "value"),
        State("run-picker", "value"),
        prevent_initial_call=True,
    )
    def zoom(
        relayout: dict | None, graph: dict, x_mode: str, window: list[float], run_ids: list[str] | None
    ) -> Any:
        """Every time-series panel refines itself server-side to the zoomed x range (full detail)."""
        if not relayout or not views.changes_x_range(relayout):
            raise PreventUpdate
        return views.zoomed_panel(
            data_dir, run_ids, graph["view"], graph["panel"], x_mode, window, relayout, max_points
        )

    @app.callback(
        Output("tab-summary", "children"),
        Input("tabs", "value"),
        Input("window", "value"),
        Input("data-version", "data"),
        State("run-picker", "value"),
        prevent_initial_call=True,
    )
    def summary(tab: str, window: list[float], _version: str | None, run_ids: list[str] | None) -> list[Any]:
        _only_on(tab, "summary")
        return views.summary_view(data_dir, run_ids, window)

    @app.callback(
        Output("tab-training", "children"),
        Input("tabs", "value"),
        Input("x-mode", "value"),
        Input("window", "value"),
        Input("data-version", "data"),
        State("run-picker", "value"),
        prevent_initial_call=True,
    )
    def training(
        tab: str, x_mode: str, window: list[float], _version: str | None, run_ids: list[str] | None
    ) -> list[Any]:
        _only_on(tab, "training")
        return views.training_view(data_dir, run_ids, x_mode, window)

    @app.callback(
        Output("image-picker", "options"),
        Output("image-picker", "value"),
        Input("data-version", "data"),
        State("run-picker", "value"),
        State("image-picker", "value"),
    )
    def image_choices(_version: str | None, run_ids: list[str] | None, current: str | None) -> tuple:
        return detections_view.image_choices(data_dir, run_ids, current)

    @app.callback(
        Output("tab-detections", "children"),
        Input("tabs", "value"),
        Input("image-picker", "value"),
        Input("data-version", "data"),
        State("run-picker", "value"),
        prevent_initial_call=True,
    )
    def detections(
        tab: str, image_id: str | None, _version: str | None, run_ids: list[str] | None
    ) -> list[Any]:
        _only_on(tab, "detections")
        return detections_view.detections_view(data_dir, run_ids, image_id)

    @app.callback(
        Output("tab-details", "children"),
        Input("tabs", "value"),
        Input("data-version", "data"),
        State("run-picker", "value"),
        prevent_initial_call=True,
    )
    def details(tab: str, _version: str | None, run_ids: list[str] | None) -> list[Any]:
        _only_on(tab, "details")
        return views.details_view(data_dir, run_ids)


def _register_component_tab(app: dash.Dash, data_dir: Path, name: str) -> None:
    @app.callback(
        Output(f"tab-{name}", "children"),
        Input("tabs", "value"),
        Input("x-mode", "value"),
        Input("window", "value"),
        Input("data-version", "data"),
        State("run-picker", "value"),
        prevent_initial_call=True,
    )
    def component(
        tab: str, x_mode: str, window: list[float], _version: str | None, run_ids: list[str] | None
    ) -> list[Any]:
        _only_on(tab, name)
        parts = views.component_view(data_dir, run_ids, name, x_mode, window)
        if name == "gpu":  # every GPU of a many-GPU run side by side
            runs = views.selected_runs(data_dir, run_ids)
            parts += gpu_side_by_side.gpu_tab_parts(runs, x_mode, views.window_of(window))
        return parts


def _only_on(active_tab: str, tab: str) -> None:
    """Hidden tabs skip their work; switching to one renders it with the current selection."""
    if active_tab != tab:
        raise PreventUpdate


def _register_file_route(app: dash.Dash, data_dir: Path) -> None:
    @app.server.route(f"{detections_view.FILES_ROUTE}/<run_id>/detections/<file_name>")
    def detection_image(run_id: str, file_name: str) -> Any:
        path = detections_view.detection_file(data_dir, run_id, file_name)
        if path is None:
            abort(404)
        return send_file(path, mimetype="image/png", max_age=60)
