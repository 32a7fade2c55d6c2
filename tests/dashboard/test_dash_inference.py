"""The Inference tab: latency and images/s per batch size per runtime, CPU vs GPU, reasons for refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import test_dash_browser as browser_test
from dash.exceptions import PreventUpdate
from test_dash_browser import browser  # noqa: F401  (the headless Chromium fixture)

from dashboard import inference_view
from dashboard.app import create_app
from dashboard.runs import get_run


def _cell(batch_size: int, p50: float, images_per_s: float) -> dict:
    return {
        "batch_size": batch_size,
        "warmup_calls": 2,
        "warmup_s": 1.5,
        "first_call_ms": p50 * 3,
        "start_unix": 1.0,
        "end_unix": 3.0,
        "calls": 10,
        "images": 10 * batch_size,
        "latency_ms_p50": p50,
        "latency_ms_p90": p50 * 1.1,
        "latency_ms_p99": p50 * 1.3,
        "latency_ms_max": p50 * 1.4,
        "latency_ms_mean": p50 * 1.05,
        "images_per_s": images_per_s,
        "ms_per_image_p99": p50 * 1.3 / batch_size,
        "rss_peak_bytes": 2**31,
    }


def _write(run_dir: Path, device: str, scale: float) -> None:
    gpu = {"gpu_mem_peak_bytes": 3 * 2**30} if device == "gpu" else {"gpu_mem_peak_note": "n/a on the CPU"}
    summary = {
        "format_version": 1,
        "device": device,
        "framework": "tensorflow",
        "status": "completed",
        "batch_sizes": [1, 4],
        "duration_per_cell_s": 2.0,
        "warmup_calls": 2,
        "input": {"height": 256, "width": 256},
        "model": {"parameters": 15_541_465, "flops_per_image": 8.1e9, "flops_note": "counted"},
        "runtimes": [
            {
                "runtime": "tf-savedmodel",
                "available": True,
                "cells": [
                    {**_cell(1, 90 * scale, 11 / scale), **gpu},
                    {**_cell(4, 250 * scale, 16 / scale), **gpu},
                ],
            },
            {
                "runtime": "onnxruntime",
                "available": True,
                "cells": [
                    {**_cell(1, 150 * scale, 6 / scale), **gpu},
                    {"batch_size": 4, "error": "out of memory"},
                ],
            },
            {"runtime": "torchscript", "available": False, "reason": "no TorchScript model at model/x.pt"},
        ],
    }
    (run_dir / "inference.json").write_text(json.dumps(summary))


def _texts(component) -> list[str]:
    if isinstance(component, (str, int, float)):
        return [str(component)]
    if isinstance(component, list):
        return [text for child in component for text in _texts(child)]
    children = getattr(component, "children", None)
    return _texts(children) if children is not None else []


@pytest.fixture
def with_inference(data_dir: Path, run_ids: dict[str, str]) -> Path:
    _write(get_run(data_dir, run_ids["cpu"]).path, "cpu", 1.0)
    _write(get_run(data_dir, run_ids["gpu"]).path, "gpu", 0.05)
    return data_dir


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
        spec["callback"] for key, spec in app.callback_map.items() if inference_view.CONTENT_ID in key
    ]
    with pytest.raises(PreventUpdate):
        callback.__wrapped__("timeseries", None, [run_ids["cpu"]])
    children = callback.__wrapped__(inference_view.TAB_VALUE, None, [run_ids["cpu"]])
    assert any(type(c).__name__ == "Graph" for c in children)
    assert "Inference" in json.dumps(app.layout(), default=lambda o: o.to_plotly_json())


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.filterwarnings("ignore:HTTPResponse.getheader:DeprecationWarning")
def test_the_inference_tab_in_chromium(
    browser,  # noqa: F811  (the fixture imported above)
    with_inference: Path,
    run_ids: dict[str, str],
) -> None:
    for url in browser_test.serve(with_inference):
        browser.get(url)
        browser_test.select_runs(browser, [run_ids["cpu"], run_ids["gpu"]])
        browser_test.open_tab(browser, "Inference")
        browser_test.wait_for(
            browser,
            lambda: browser.execute_script(browser_test.PLOTS_WITH_DATA, "#tab-inference"),
            "the Inference tab's plots",
        )
        names = browser.execute_script(browser_test.TRACE_NAMES, "#tab-inference")
        assert "gpu h100 (gpu) · tf-savedmodel" in names and "cpu baseline (cpu) · onnxruntime" in names
        assert "cannot take this model" in browser.find_element("id", "tab-inference").text
        assert browser_test.browser_errors(browser) == []
