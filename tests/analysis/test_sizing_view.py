"""The dashboard's Sizing page: layout, content for a selection, downloads and callback wiring."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dash
import pytest
from dash import dcc, html
from dash.exceptions import PreventUpdate
from sizingfixtures import reference_cpu, write_run

from dashboard import sizing_view
from dashboard.tabs import sizing as sizing_tab

DEFAULTS = [default for _, _, default, _, _ in sizing_view.FIELDS]


def walk(component: Any) -> list[Any]:
    """Every component in a Dash tree."""
    found = [component]
    children = getattr(component, "children", None)
    if isinstance(children, list | tuple):
        for child in children:
            found += walk(child)
    elif children is not None and not isinstance(children, str | int | float):
        found += walk(children)
    return found


def all_text(components: list[Any]) -> str:
    parts = []
    for tree in components:
        for node in walk(tree):
            children = getattr(node, "children", None)
            if isinstance(children, str):
                parts.append(children)
            elif isinstance(children, list | tuple):
                parts += [c for c in children if isinstance(c, str)]
    return " ".join(parts)


def test_layout_has_every_input_and_reads_no_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no data/ here: the layout must not need one
    ids = {getattr(c, "id", None) for c in walk(sizing_tab.layout())}
    assert {sizing_tab.field_id(name) for name, *_ in sizing_view.FIELDS} <= ids
    assert {sizing_tab.RESULT_ID, sizing_tab.DOWNLOAD_ID} <= ids


def test_content_for_a_cpu_and_gpu_selection(crafted_data_dir: Path) -> None:
    values = DEFAULTS.copy()
    values[1], values[4] = 2000, 10  # GPU price, value per hour
    content = sizing_view.sizing_content(crafted_data_dir, ["ref-cpu", "ref-gpu"], values)
    text = all_text(content)
    assert "20.00×" in text and "GPU-bound + thermally throttled" in text and "CPU-bound" in text
    assert "pays back its $2,000.00 after" in text
    graphs = [c for tree in content for c in walk(tree) if isinstance(c, dcc.Graph)]
    assert len(graphs) >= 3
    assert len([c for tree in content for c in walk(tree) if isinstance(c, html.Table)]) >= 8


def test_bad_settings_and_bad_runs_become_notes(crafted_data_dir: Path) -> None:
    values = DEFAULTS.copy()
    values[0] = "cheap"
    assert "tariff must be a number, got 'cheap'" in all_text(
        sizing_view.sizing_content(crafted_data_dir, ["ref-cpu"], values)
    )
    values[0] = -1
    assert "tariff must be a number ≥ 0" in all_text(
        sizing_view.sizing_content(crafted_data_dir, ["ref-cpu"], values)
    )
    values[0] = 15  # cents
    content = sizing_view.sizing_content(crafted_data_dir, ["ref-cpu"], values)
    assert "cents given? (0.15 USD)" in all_text(content)
    bare = reference_cpu("bare")
    write_run(
        crafted_data_dir / "runs",
        type(bare)("bare", bare.meta, {}, {}, bare.telemetry, bare.training.iloc[0:0], bare.phases),
    )
    content = sizing_view.sizing_content(crafted_data_dir, ["ref-cpu", "../etc", "bare"], DEFAULTS)
    text = all_text(content)
    assert "'../etc': no such run" in text
    assert "unknown (no work counter)" in text  # a run without training files is still sized
    assert "CPU-bound" in text  # the good run is still sized
    assert "Select runs" in all_text(sizing_view.sizing_content(crafted_data_dir, [], DEFAULTS))


def test_download_payloads(crafted_data_dir: Path) -> None:
    markdown = sizing_view.download_payload(crafted_data_dir, ["ref-cpu", "ref-gpu"], DEFAULTS, "markdown")
    assert markdown["filename"].endswith(".md")
    assert markdown["content"].startswith("# Is the GPU worth it?")
    page = sizing_view.download_payload(crafted_data_dir, ["ref-cpu"], DEFAULTS, "html")
    assert page["filename"].endswith(".html") and "<table>" in page["content"]
    assert sizing_view.download_payload(crafted_data_dir, [], DEFAULTS, "html") is None


def test_callbacks_are_wired_to_the_run_picker(crafted_data_dir: Path) -> None:
    app = dash.Dash(__name__)
    app.layout = html.Div([dcc.Dropdown(id=sizing_tab.PICKER_ID, multi=True), sizing_tab.layout()])
    sizing_tab.register(app, crafted_data_dir)
    show = app.callback_map[f"{sizing_tab.RESULT_ID}.children"]
    assert any(i["id"] == sizing_tab.PICKER_ID for i in show["inputs"])
    assert any(i["id"] == sizing_tab.TABS_ID for i in show["inputs"])
    assert len(show["inputs"]) == 2 + len(sizing_view.FIELDS)
    assert f"{sizing_tab.DOWNLOAD_ID}.data" in app.callback_map
    content = show["callback"].__wrapped__(sizing_tab.TAB_VALUE, ["ref-cpu"], *DEFAULTS)
    assert "CPU-bound" in all_text(content)
    with pytest.raises(PreventUpdate):  # another tab is showing: no report is built
        show["callback"].__wrapped__("timeseries", ["ref-cpu"], *DEFAULTS)


def test_the_form_has_the_prices_utilisation_and_idle_floor_of_the_cli(crafted_data_dir: Path) -> None:
    names = [name for name, *_ in sizing_view.FIELDS]
    assert {"utilisation", "idle-fraction", "gpu-prices-by-model", "host-prices"} <= set(names)
    values = dict(zip(names, DEFAULTS, strict=True))
    values.update({"utilisation": 0.5, "idle-fraction": 0.1, "gpu-prices-by-model": "Crafted H100=3000",
                   "host-prices": "craftbox=1000", "value-per-hour": 10})  # fmt: skip
    settings = sizing_view.settings_of(list(values.values()))
    prices = settings.prices
    assert (prices.utilisation, prices.idle_fraction) == (0.5, 0.1)
    assert prices.gpu_price_by_model == (("Crafted H100", 3000.0),)
    assert prices.host_price_by_host == (("craftbox", 1000.0),)
    text = all_text(
        sizing_view.sizing_content(crafted_data_dir, ["ref-cpu", "ref-gpu"], list(values.values()))
    )
    assert "pays back its $3,000.00 after" in text and "3-year life at 50% use" in text
    values["gpu-prices-by-model"] = "H100"
    assert "GPU prices per model: expected NAME=USD, got 'H100'" in all_text(
        sizing_view.sizing_content(crafted_data_dir, ["ref-cpu"], list(values.values()))
    )
    values["gpu-prices-by-model"], values["utilisation"] = "", 0
    assert "utilisation must be > 0 and ≤ 1" in all_text(
        sizing_view.sizing_content(crafted_data_dir, ["ref-cpu"], list(values.values()))
    )
