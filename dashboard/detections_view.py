"""The Detections tab: each selected run's detections on one held-out image, and the PNGs it shows."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from dash import html

from dashboard.cells import hint
from dashboard.runs import RunInfo, get_run, read_detections
from dashboard.views import MAX_DETECTION_RUNS, selected_runs

FILES_ROUTE = "/run-files"
_SAFE_FILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\.png$")


def image_options(data_dir: Path, run_ids: Sequence[str] | None) -> list[dict[str, str]]:
    """Held-out image ids in any selected run with detections, those shared by all of them first."""
    runs = selected_runs(data_dir, run_ids, MAX_DETECTION_RUNS)
    per_run = [ids for run in runs if (ids := [image.get("image_id") for image in _images(run)])]
    every = [
        image_id for image_id in dict.fromkeys(i for ids in per_run for i in ids) if isinstance(image_id, str)
    ]
    shared = [i for i in every if all(i in ids for ids in per_run)]
    rest = [i for i in every if i not in shared]
    return [{"label": i, "value": i} for i in shared] + [
        {"label": f"{i} (not in every run)", "value": i} for i in rest
    ]


def image_choices(
    data_dir: Path, run_ids: Sequence[str] | None, current: str | None
) -> tuple[list[dict[str, str]], str | None]:
    """The image picker's options, and its value: the current image if still there, else the first."""
    options = image_options(data_dir, run_ids)
    values = [option["value"] for option in options]
    return options, current if current in values else (values[0] if values else None)


def detections_view(data_dir: Path, run_ids: Sequence[str] | None, image_id: str | None) -> list[Any]:
    """One card per selected run with detections; one line naming the runs without any."""
    runs = selected_runs(data_dir, run_ids, MAX_DETECTION_RUNS)
    if not runs:
        return [hint("Select runs in the picker above.")]
    with_images = [run for run in runs if _images(run)]
    without = [run.label for run in runs if run not in with_images]
    note = (
        [hint(f"No detections (no detections/detections.json) in: {', '.join(without)}.")] if without else []
    )
    if not with_images or not image_id:
        return [hint("No held-out images with detections in the selected runs."), *note]
    return [*note, html.Div([_detection_card(run, image_id) for run in with_images], className="cards")]


def detection_file(data_dir: Path, run_id: str, file_name: str) -> Path | None:
    """The detections PNG a browser may fetch: a safe name inside a valid run's detections/ only."""
    run = get_run(data_dir, run_id)
    if run is None or not _SAFE_FILE.fullmatch(file_name):
        return None
    path = run.path / "detections" / file_name
    return path.absolute() if path.is_file() else None  # Flask resolves relative paths from its package


def _detection_card(run: RunInfo, image_id: str) -> Any:
    image = next((i for i in _images(run) if i.get("image_id") == image_id), None)
    map_50 = run.evaluation.get("map_50")
    header = html.H4(f"{run.label} · {run.device}")
    score = html.P(
        f"mAP@0.5 {map_50:.3f}" if isinstance(map_50, int | float) else "mAP@0.5: no eval.json",
        className="map",
    )
    if image is None:
        return html.Div(
            [header, score, hint(f"{image_id} is not among this run's detections.")], className="card"
        )
    file_name = str(image.get("file") or "")
    body: list[Any] = [header, score]
    if _SAFE_FILE.fullmatch(file_name):
        src = f"{FILES_ROUTE}/{quote(run.run_id)}/detections/{quote(file_name)}"
        body.append(html.Img(src=src, alt=f"{image_id} · {run.label}", className="detection-image"))
    found = [d for d in image.get("detections", []) if isinstance(d, dict)]
    rows = [
        html.Tr([html.Td(f"{d.get('score', float('nan')):.2f}"), html.Td(_box_text(d.get("box")))])
        for d in found
    ]
    truth = len(image.get("ground_truth") or [])
    body.append(
        html.P(f"{len(found)} detection(s), {truth} ground-truth box(es); red: predicted, green: truth")
    )
    if rows:
        body.append(
            html.Table(
                [
                    html.Thead(html.Tr([html.Th("score"), html.Th("box [ymin, xmin, ymax, xmax]")])),
                    html.Tbody(rows),
                ],
                className="kv",
            )
        )
    return html.Div(body, className="card")


def _images(run: RunInfo) -> list[dict[str, Any]]:
    return [image for image in read_detections(run).get("images", []) if isinstance(image, dict)]


def _box_text(box: Any) -> str:
    if isinstance(box, list) and all(isinstance(v, int | float) for v in box):
        return "[" + ", ".join(f"{v:.0f}" for v in box) + "]"
    return "?"
