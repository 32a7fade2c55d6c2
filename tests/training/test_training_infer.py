"""`python -m training infer`, for real: the TF runtimes and ONNX Runtime on a real short training's
export, TorchScript on the real short torch training's (conftest.py's two runs; ONNX Runtime on the torch
export is in test_training_torch.py)."""

from __future__ import annotations

import csv
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from trainfixtures import REPO, CompletedRun, run_training_cli, training_env

from runformat import read_json
from training.inference.measure import PHASE_DURATION_S
from training.inference.runtimes import tf_savedmodel, tf_xla
from training.inference.runtimes.base import ONNX_FILE, TORCHSCRIPT_FILE

TF_RUNTIMES = ("tf-savedmodel", "tf-xla", "onnxruntime")
CELL_KEYS = (
    "latency_ms_p50",
    "latency_ms_p90",
    "latency_ms_p99",
    "latency_ms_max",
    "images_per_s",
    "warmup_s",
    "first_call_ms",
    "rss_peak_bytes",
)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _by_runtime(summary: dict) -> dict[str, dict]:
    return {entry["runtime"]: entry for entry in summary["runtimes"]}


def _check_cells(run_dir: Path, summary: dict, runtime: str, batch_sizes: list[int]) -> None:
    entry = _by_runtime(summary)[runtime]
    assert entry["available"] is True, entry
    assert [cell["batch_size"] for cell in entry["cells"]] == batch_sizes
    rows = [row for row in _rows(run_dir / "inference.csv") if row["runtime"] == runtime]
    for cell in entry["cells"]:
        assert all(key in cell for key in CELL_KEYS), cell
        assert cell["calls"] >= summary["min_calls"]
        assert cell["images"] == cell["calls"] * cell["batch_size"]
        assert 0 < cell["latency_ms_p50"] <= cell["latency_ms_p90"] <= cell["latency_ms_p99"]
        assert cell["latency_ms_p99"] <= cell["latency_ms_max"]
        assert cell["ms_per_image_p99"] == pytest.approx(
            cell["latency_ms_p99"] / cell["batch_size"], rel=1e-3
        )
        # images/s over the cell's wall time cannot exceed what the mean latency allows
        assert cell["images_per_s"] <= cell["batch_size"] * 1000 / cell["latency_ms_mean"] * 1.01
        cell_rows = [row for row in rows if int(row["batch_size"]) == cell["batch_size"]]
        assert len(cell_rows) == cell["calls"]  # one row per measured call; warm-up calls are not rows
        times = [float(row["time_unix"]) for row in cell_rows]
        assert cell["start_unix"] <= times[0] and times[-1] <= cell["end_unix"]
        assert max(float(row["latency_ms"]) for row in cell_rows) == pytest.approx(
            cell["latency_ms_max"], abs=1e-2
        )
        assert cell["gpu_mem_peak_note"] == "n/a on the CPU"


@pytest.mark.slow
def test_infer_phase_after_training_measures_every_tf_runtime(trained_run: CompletedRun) -> None:
    assert trained_run.returncode == 0, trained_run.stderr[-3000:]
    run_dir = trained_run.run_dir
    summary = read_json(run_dir / "inference.json")
    assert summary["status"] == "completed" and summary["device"] == "cpu"
    assert summary["framework"] == "tensorflow"
    assert summary["batch_sizes"] == [1, 4] and summary["duration_per_cell_s"] == PHASE_DURATION_S
    assert _rows(run_dir / "inference.csv")[0].keys() == {"time_unix", "runtime", "batch_size", "latency_ms"}
    for runtime in TF_RUNTIMES:
        _check_cells(run_dir, summary, runtime, [1, 4])
    torchscript = _by_runtime(summary)["torchscript"]
    assert torchscript["available"] is False
    assert TORCHSCRIPT_FILE in torchscript["reason"]
    assert "torchscript: cannot take this model: no TorchScript model" in trained_run.stdout
    onnx = _by_runtime(summary)["onnxruntime"]
    assert "tf2onnx" in onnx["notes"][0] and (run_dir / ONNX_FILE).is_file()
    assert len(onnx["notes"]) == 1, onnx["notes"]  # converted once: the unguarded optimizer passes worked
    # one load of the SavedModel in the training's process: evaluate's
    assert _by_runtime(summary)["tf-savedmodel"]["notes"] == [tf_savedmodel.SHARED_NOTE]
    assert _by_runtime(summary)["tf-xla"]["notes"] == [tf_xla.SHARED_NOTE]
    # Parameters and FLOPs of the model itself, counted by TensorFlow
    model = summary["model"]
    assert 5e6 < model["parameters"] < 5e7  # ResNet-18 FPN Faster R-CNN
    assert 1e9 < model["flops_per_image"] < 1e11 and "convolutions" in model["flops_note"]
    phases = {row["phase"]: row for row in _rows(run_dir / "phases.csv")}
    assert phases["infer"]["status"] == "ok"
    assert float(phases["infer"]["start_unix"]) <= summary["start_unix"] <= summary["end_unix"]
    assert summary["end_unix"] <= float(phases["infer"]["end_unix"])
    assert summary["process_peak_rss_bytes"] >= max(
        cell["rss_peak_bytes"] for entry in summary["runtimes"] for cell in entry.get("cells", [])
    )


@pytest.mark.slow
def test_infer_alone_reuses_the_onnx_conversion(trained_run: CompletedRun, tmp_path: Path) -> None:
    """`python -m training infer` on its own, the runtimes and batch sizes in the order given. ONNX Runtime
    reuses the infer phase's conversion, and a runtime that cannot take the model says why; the TF
    runtimes' cells are the infer phase's test above (the same code, run in the training's process)."""
    copy = tmp_path / "copy"
    shutil.copytree(trained_run.run_dir, copy, ignore=shutil.ignore_patterns("checkpoints", "inference.*"))
    done = run_training_cli(
        "infer",
        str(copy),
        "--runtime",
        "onnxruntime",
        "--runtime",
        "torchscript",
        "--batch-sizes",
        "2,1",
        "--duration",
        "1s",
        "--warmup",
        "1",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = read_json(copy / "inference.json")
    assert [entry["runtime"] for entry in summary["runtimes"]] == ["onnxruntime", "torchscript"]
    _check_cells(copy, summary, "onnxruntime", [2, 1])
    assert _by_runtime(summary)["onnxruntime"]["notes"] == [f"reused {ONNX_FILE}"]
    assert _by_runtime(summary)["torchscript"]["available"] is False
    assert [row["phase"] for row in _rows(copy / "phases.csv")][-1] == "infer"
    assert "infer: measured onnxruntime into" in done.stdout
    assert "infer: torchscript: cannot take this model: no TorchScript model" in done.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--batch-sizes", "1,x"], "batch sizes"),
        (["--batch-sizes", "0"], "batch sizes"),
        (["--runtime", "tensorrt"], "unknown runtime"),
        (["--duration", "5 parsecs"], "duration"),
        (["--device", "tpu"], "invalid choice"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(tmp_path: Path, args: list[str], fragment: str) -> None:
    done = run_training_cli("infer", str(tmp_path), *args, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and fragment in done.stderr and "Traceback" not in done.stderr


def test_missing_run_directory_is_a_usage_error(tmp_path: Path) -> None:
    done = run_training_cli("infer", str(tmp_path / "nope"), timeout=120)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "no such run directory" in done.stderr


def test_a_run_without_a_model_names_every_runtime_and_its_reason(tmp_path: Path) -> None:
    (tmp_path / "training.json").write_text(json.dumps({"format_version": 1, "image_size": 256}))
    done = run_training_cli("infer", str(tmp_path), "--duration", "1s", timeout=300)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "no runtime could take this model" in done.stderr
    summary = read_json(tmp_path / "inference.json")
    assert [(r["runtime"], r["available"]) for r in summary["runtimes"]] == [
        ("tf-savedmodel", False),
        ("tf-xla", False),
        ("onnxruntime", False),
        ("torchscript", False),
    ]
    assert all(r["reason"] for r in summary["runtimes"])
    assert summary["model"]["flops_per_image"] is None and "not measured" in summary["model"]["flops_note"]
    assert [row["phase"] for row in _rows(tmp_path / "phases.csv")] == ["infer"]
    assert _rows(tmp_path / "phases.csv")[0]["status"] == "failed"


def test_onnxruntime_needs_the_torch_export_description_to_rebuild_the_eager_model(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / TORCHSCRIPT_FILE).write_bytes(b"not read: the check comes first")
    (tmp_path / "training.json").write_text(json.dumps({"framework": "torch", "image_size": 256}))
    done = run_training_cli("infer", str(tmp_path), "--runtime", "onnxruntime", timeout=120)
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    reason = "nothing to convert: no model/export.json (run `python -m training export`)"
    assert read_json(tmp_path / "inference.json")["runtimes"][0]["reason"] == reason
    assert f"onnxruntime: cannot take this model: {reason}" in done.stdout


INFER_AND_REPORT_IMPORTS = """
import sys
from training.cli import main
code = main(sys.argv[1:])
print("tensorflow imported:", "tensorflow" in sys.modules)
sys.exit(code)
"""


@pytest.mark.slow
def test_torchscript_runtime_on_the_torch_runs_export(torch_run: dict, tmp_path: Path) -> None:
    """conftest's torch run (trained without TensorFlow), measured again here where TensorFlow *is*
    importable: the torch path still never imports it."""
    run_dir = tmp_path / "torch-run"
    unneeded = shutil.ignore_patterns("checkpoints", "inference.*")
    shutil.copytree(torch_run["run_dir"], run_dir, ignore=unneeded)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            INFER_AND_REPORT_IMPORTS,
            "infer",
            str(run_dir),
            "--runtime",
            "tf-savedmodel,tf-xla,torchscript",
            "--batch-sizes",
            "1,2",
            "--duration",
            "1s",
            "--warmup",
            "1",
        ],
        cwd=REPO,
        env=training_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "tensorflow imported: False" in done.stdout  # the torch path never imports TensorFlow
    summary = read_json(run_dir / "inference.json")
    assert summary["framework"] == "torch"
    _check_cells(run_dir, summary, "torchscript", [1, 2])
    runtimes = _by_runtime(summary)
    for name in ("tf-savedmodel", "tf-xla"):
        assert runtimes[name]["available"] is False and "SavedModel" in runtimes[name]["reason"]
    assert summary["model"]["measured_by"] == "torchscript"
    assert 5e6 < summary["model"]["parameters"] < 5e7  # ResNet-18-FPN Faster R-CNN, as the TF `small`
    assert summary["model"]["flops_per_image"] or summary["model"]["flops_note"].startswith("not measured")


@pytest.mark.slow
def test_sigterm_stops_after_the_current_call_and_keeps_every_row(torch_run: dict, tmp_path: Path) -> None:
    """The measuring loop is the same for every runtime: checked on the torch run's TorchScript, which
    loads in seconds."""
    copy = tmp_path / "copy"
    shutil.copytree(torch_run["run_dir"], copy, ignore=shutil.ignore_patterns("checkpoints", "inference.*"))
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "training",
            "infer",
            str(copy),
            "--runtime",
            "torchscript",
            "--batch-sizes",
            "1",
            "--duration",
            "10m",
        ],
        cwd=REPO,
        env=torch_run["env"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    csv_path = copy / "inference.csv"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and (
        not csv_path.exists() or len(csv_path.read_text().splitlines()) < 4
    ):
        assert process.poll() is None, process.communicate()
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM, stderr[-2000:]
    assert "SIGTERM: stopping after the current call" in stdout
    summary = read_json(copy / "inference.json")
    assert summary["status"] == "interrupted"
    (cell,) = _by_runtime(summary)["torchscript"]["cells"]
    rows = _rows(csv_path)
    assert cell["calls"] == len(rows) >= 3
