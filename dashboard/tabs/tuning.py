"""The "Tuning" tab: one `--tune` sweep's trials together (dashboard.tuning_view), picked by its id.

The sweep picker is re-listed on every refresh of the run list while the tab shows, and the content is
redrawn when a file of a sweep's run changes; a trial's run id adds that run to the run picker.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dash
from dash import ALL, Input, Output, State, dcc
from dash.exceptions import PreventUpdate

from dashboard import tuning_view
from dashboard.tabs.base import PICKER_ID, TABS_ID, Tab, content_id, loading, only_on

TAB_VALUE = "tuning"
SWEEP_PICKER_ID = "sweep-picker"
SWEEP_VERSION_ID = "sweep-version"


def layout() -> list[Any]:
    return [
        dcc.Dropdown(id=SWEEP_PICKER_ID, placeholder="tuning sweep", clearable=False, className="metric"),
        dcc.Store(id=SWEEP_VERSION_ID),
        loading(content_id(TAB_VALUE)),
    ]


def register(app: dash.Dash, data_dir: Path, _max_points: int) -> None:
    @app.callback(
        Output(SWEEP_PICKER_ID, "options"),
        Output(SWEEP_PICKER_ID, "value"),
        Output(SWEEP_VERSION_ID, "data"),
        Input(TABS_ID, "value"),
        Input(PICKER_ID, "options"),  # re-listed on every refresh tick
        State(SWEEP_PICKER_ID, "value"),
        State(SWEEP_VERSION_ID, "data"),
    )
    def sweeps(tab: str, _runs: Any, current: str | None, version: str | None) -> tuple:
        only_on(tab, TAB_VALUE)
        options, value, latest = tuning_view.sweep_choices(data_dir, current)
        if latest == version and value == current:
            raise PreventUpdate
        return options, value, latest

    @app.callback(
        Output(content_id(TAB_VALUE), "children"),
        Input(TABS_ID, "value"),
        Input(SWEEP_PICKER_ID, "value"),
        Input(SWEEP_VERSION_ID, "data"),
        prevent_initial_call=True,
    )
    def content(tab: str, sweep_id: str | None, _version: str | None) -> list[Any]:
        only_on(tab, TAB_VALUE)
        return tuning_view.tuning_content(data_dir, sweep_id)

    @app.callback(
        Output(PICKER_ID, "value"),
        Input({"type": tuning_view.RUN_LINK, "run": ALL}, "n_clicks"),
        State(PICKER_ID, "value"),
        prevent_initial_call=True,
    )
    def pick_run(_clicks: list[int | None], selection: list[str] | None) -> list[str]:
        clicked = dash.ctx.triggered_id
        if not isinstance(clicked, dict) or not any(t["value"] for t in dash.ctx.triggered):
            raise PreventUpdate  # new buttons drawn, none clicked
        return tuning_view.select_run(selection, clicked["run"])


TAB = Tab(TAB_VALUE, "Tuning", layout, register)
