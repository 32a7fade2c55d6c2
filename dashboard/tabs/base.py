"""What a tab is made of, the ids of the frame around the tabs, and the usual kind of tab.

A tab's callbacks read the frame (dashboard.app): the tab bar, the run picker, the x-axis mode, the
window slider and the `data-version` store, bumped when a file of a selected run changes. A hidden tab
skips its work; switching to it renders it with the current selection.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dash
from dash import Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

TABS_ID = "tabs"
PICKER_ID = "run-picker"
VERSION_ID = "data-version"
X_MODE_ID = "x-mode"
WINDOW_ID = "window"

Register = Callable[[dash.Dash, Path, int], None]
View = Callable[..., list[Any]]  # view(data_dir, run_ids, *control values) -> the tab's components


@dataclass(frozen=True)
class Tab:
    value: str
    label: str
    layout: Callable[[], Any]
    register: Register  # (app, data_dir, max_points per trace)

    def component(self) -> dcc.Tab:
        return dcc.Tab(label=self.label, value=self.value, children=self.layout())


def only_on(active_tab: str, tab: str) -> None:
    """Hidden tabs skip their work; switching to one renders it with the current selection."""
    if active_tab != tab:
        raise PreventUpdate


def loading(content_id: str) -> Any:
    """The tab's content area, with a spinner while a long run is parsed for the first time."""
    return dcc.Loading(html.Div(id=content_id), delay_show=400, type="circle")


def content_id(value: str) -> str:
    return f"tab-{value}"


def register_content(
    app: dash.Dash, data_dir: Path, value: str, view: View, controls: Sequence[str] = ()
) -> None:
    """The tab's content area shows `view(data_dir, run_ids, *controls' values)` while the tab shows."""

    @app.callback(
        Output(content_id(value), "children"),
        Input(TABS_ID, "value"),
        *[Input(control, "value") for control in controls],
        Input(VERSION_ID, "data"),
        State(PICKER_ID, "value"),
        prevent_initial_call=True,
    )
    def content(tab: str, *values: Any) -> list[Any]:
        only_on(tab, value)
        *control_values, _version, run_ids = values
        return view(data_dir, run_ids, *control_values)


def register_choices(
    app: dash.Dash, data_dir: Path, dropdown_id: str, choices: Callable[..., tuple[list, Any]]
) -> None:
    """A tab's own dropdown: `choices(data_dir, run_ids, current)` -> (options, value), on every new data."""

    @app.callback(
        Output(dropdown_id, "options"),
        Output(dropdown_id, "value"),
        Input(VERSION_ID, "data"),
        State(PICKER_ID, "value"),
        State(dropdown_id, "value"),
    )
    def choose(_version: str | None, run_ids: list[str] | None, current: str | None) -> tuple:
        return choices(data_dir, run_ids, current)


def content_tab(value: str, label: str, view: View, controls: Sequence[str] = ()) -> Tab:
    """The usual tab: one content area under a spinner, redrawn from `view` (see register_content)."""

    def register(app: dash.Dash, data_dir: Path, _max_points: int) -> None:
        register_content(app, data_dir, value, view, controls)

    return Tab(value, label, lambda: loading(content_id(value)), register)
