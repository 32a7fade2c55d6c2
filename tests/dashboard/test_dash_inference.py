"""The Inference tab: latency and images/s per batch size per runtime, CPU vs GPU, reasons for refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dash.exceptions import PreventUpdate

from dashboard import inference_view
from dashboard.app import create_app
from dashboard.tabs import inference as inference_tab


def _texts(component) -> list[str]:
    if isinstance(component, (str, int, float)):
        return [str(component)]
    if isinstance(component, list):
        return [text for child in component for text in _texts(child)]
    children = getattr(component, "children", None)
    return _texts(children) if children is not None else []


def test_latency_and_throughput_per_runtime_cpu_vs_gpu(with_inference: Path, run_ids: dict[str, str]) -> None:
    children = inference_view.inference_view(with_inference, [run_ids["cpu"], run_ids["gpu"]])
    graphs = [c.figure for c in children if type(c).__name__ == "Graph"]
    latency, throughput = graphs
    names = [trace.name for trace in latency.data]
    assert names == [
        "cpu baseline (cpu) · tf-savedmodel",
        "cpu baseline (cpu) · onnxruntime",
        "gpu h100 (gpu) · tf-savedmodel",
        "gpu h100 (gpu) · onnxruntime",
    ]
    assert list(latency.data[0].x) == [1, 4] and list(latency.data[0].y) == [90, 250]
    assert latency.data[0].error_y.array[0] == pytest.approx(90 * 0.3)  # the bar reaches p99
    assert latency.data[0].line.dash == "dot" and latency.data[2].line.dash == "solid"  # CPU vs GPU
    assert list(throughput.data[2].y) == pytest.approx([11 / 0.05, 16 / 0.05])
    assert list(latency.data[1].x) == [1]  # the failed batch 4 is not plotted...
    text = " ".join(_texts(children))
    assert "out of memory" in text  # ...but said in the table
    assert "cannot take this model: no TorchScript model at model/x.pt" in text
    assert "3,072 MiB" in text and "n/a on the CPU" in text
    assert "15.54 M parameters, 8.10 GFLOPs per image" in text


def test_a_run_without_inference_says_how_to_get_it(data_dir: Path, run_ids: dict[str, str]) -> None:
    text = " ".join(_texts(inference_view.inference_view(data_dir, [run_ids["cpu"]])))
    assert "no inference.json" in text and "python -m training infer" in text


def test_the_tab_is_wired_into_the_app(with_inference: Path, run_ids: dict[str, str]) -> None:
    app = create_app(with_inference)
    [callback] = [
        spec["callback"] for key, spec in app.callback_map.items() if inference_tab.CONTENT_ID in key
    ]
    with pytest.raises(PreventUpdate):
        callback.__wrapped__("timeseries", None, [run_ids["cpu"]])
    children = callback.__wrapped__(inference_tab.TAB_VALUE, None, [run_ids["cpu"]])
    assert any(type(c).__name__ == "Graph" for c in children)
    assert "Inference" in json.dumps(app.layout(), default=lambda o: o.to_plotly_json())
