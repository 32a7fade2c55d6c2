"""The "Detections" tab: one held-out image with each selected run's boxes, and the route serving the
images' files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dash
from dash import dcc
from flask import abort, send_file

from dashboard import detections_view
from dashboard.tabs.base import Tab, content_id, loading, register_choices, register_content

TAB_VALUE = "detections"
IMAGE_PICKER_ID = "image-picker"


def layout() -> list[Any]:
    return [
        dcc.Dropdown(id=IMAGE_PICKER_ID, placeholder="held-out image", clearable=False, className="metric"),
        loading(content_id(TAB_VALUE)),
    ]


def register(app: dash.Dash, data_dir: Path, _max_points: int) -> None:
    register_choices(app, data_dir, IMAGE_PICKER_ID, detections_view.image_choices)
    register_content(app, data_dir, TAB_VALUE, detections_view.detections_view, (IMAGE_PICKER_ID,))

    @app.server.route(f"{detections_view.FILES_ROUTE}/<run_id>/detections/<file_name>")
    def detection_image(run_id: str, file_name: str) -> Any:
        path = detections_view.detection_file(data_dir, run_id, file_name)
        if path is None:
            abort(404)
        return send_file(path, mimetype="image/png", max_age=60)


TAB = Tab(TAB_VALUE, "Detections", layout, register)
