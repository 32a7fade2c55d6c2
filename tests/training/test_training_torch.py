"""`--framework torch`: the torchvision twin, run for real where `import tensorflow` fails.

Every subprocess here gets a sitecustomize (via PYTHONPATH) whose meta path finder raises ImportError
for tensorflow, Model Garden and Keras and writes each attempt to a file (trainfixtures.BLOCKER): the
torch path must generate its dataset, train, checkpoint, resume, export, evaluate, draw and infer without
them, as on a GPU machine that has PyTorch and no TensorFlow. The run itself is conftest.py's `torch_run`.
"""

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
from trainfixtures import REPO, cli_in

from runformat import read_json
from training.inference.measure import PHASE_DURATION_S

pytestmark = pytest.mark.slow


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_torch_run_trains_exports_evaluates_and_draws_without_tensorflow(torch_run: dict) -> None:
    """`collect_cpu.sh 3m --framework torch` through the collector: a torch run directory, every phase."""
    done, run_dir = torch_run["done"], torch_run["run_dir"]
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert "export: TorchScript of step 8" in done.stdout and "mAP@0.5" in done.stdout
    blocked = Path(torch_run["env"]["BLOCKED_IMPORT_LOG"])
    assert not blocked.exists(), f"the torch path tried to import: {blocked.read_text()}"
    run = read_json(run_dir / "run.json")
    assert run["label"] == "cpu torch small 3m" and run["end_reason"] == "completed"
    assert run["command"][run["command"].index("--framework") + 1] == "torch"
    phases = [row["phase"] for row in _rows(run_dir / "phases.csv")]
    assert phases == ["train", "export", "evaluate", "detect", "infer"]  # infer: TF-free runtimes only
    inference = json.loads((run_dir / "inference.json").read_text())
    assert {r["runtime"] for r in inference["runtimes"] if r["available"]} == {"onnxruntime", "torchscript"}
    assert inference["duration_per_cell_s"] == PHASE_DURATION_S
    rows = _rows(run_dir / "training.csv")
    assert [int(row["step"]) for row in rows] == list(range(1, 9))
    assert all(float(row["loss_total"]) > 0 and float(row["step_time_s"]) > 0 for row in rows)
    report = read_json(run_dir / "eval.json")
    assert report["num_images"] == 3 and report["framework"] == "torch" and report["global_step"] == 8
    drawn = read_json(run_dir / "detections" / "detections.json")
    assert [image["image_id"] for image in drawn["images"]] == ["val_0000", "val_0001", "val_0002"]
    assert all((run_dir / "detections" / image["file"]).is_file() for image in drawn["images"])


def test_training_json_records_the_framework_and_device(torch_run: dict) -> None:
    info = read_json(torch_run["run_dir"] / "training.json")
    assert info["status"] == "completed" and info["steps"] == 8 and info["global_step"] == 8
    assert info["framework"] == "torch" and info["framework_version"].split(".")[0] == "2"
    assert info["torch_device"] == "cpu" and info["device_used"] == "CPU" and info["gpu_names"] == []
    assert info["precision"] == "float32" and info["loss_read_every_steps"] == 1
    assert info["config"]["architecture"] == "resnet18_fpn128" and info["config"]["image_size"] == 256
    assert info["last_checkpoint"] == "checkpoints/ckpt-8.pt"
    checkpoints = sorted(p.name for p in (torch_run["run_dir"] / "checkpoints").iterdir())
    assert "ckpt-8.pt" in checkpoints and len(checkpoints) <= 3  # pruning: test_sigterm_stops_…


def test_export_is_torchscript_that_loads_without_our_code(torch_run: dict) -> None:
    import torch
    import torchvision  # noqa: F401  (registers the ops the TorchScript calls)

    model_dir = torch_run["run_dir"] / "model"
    info = json.loads((model_dir / "export.json").read_text())
    assert info["format"] == "torchscript" and info["framework"] == "torch" and info["global_step"] == 8
    model = torch.jit.load(str(model_dir / info["file"]))
    model.eval()
    with torch.no_grad():
        _, detections = model([torch.rand(3, 256, 256)])
    assert set(detections[0]) == {"boxes", "scores", "labels"}


def test_onnxruntime_takes_the_torch_model_checked_against_torchscript(torch_run: dict) -> None:
    """The infer phase converted the eager model per batch size and kept each file only once ONNX Runtime's
    detections matched TorchScript's on the timed images; here the files are checked again, on other
    images, by this test's own comparison."""
    import onnxruntime as ort
    import torch
    import torchvision  # noqa: F401  (registers the ops the TorchScript calls)

    run_dir = torch_run["run_dir"]
    inference = json.loads((run_dir / "inference.json").read_text())
    onnx = next(r for r in inference["runtimes"] if r["runtime"] == "onnxruntime")
    assert [cell["batch_size"] for cell in onnx["cells"] if "latency_ms_p50" in cell] == [1, 4], onnx
    assert len(onnx["notes"]) == 2, onnx["notes"]
    for note, batch_size in zip(onnx["notes"], (1, 4), strict=True):
        assert note.startswith(f"converted to model/model-batch{batch_size}.onnx with torch.onnx"), note
        assert f"agrees with TorchScript on the {batch_size} image(s) it is timed on" in note, note
    scripted = torch.jit.load(str(run_dir / "model" / "model.torchscript.pt")).eval()
    generator = torch.Generator().manual_seed(5)
    for batch_size in (1, 4):
        session = ort.InferenceSession(str(run_dir / "model" / f"model-batch{batch_size}.onnx"))
        assert [i.shape for i in session.get_inputs()] == [[batch_size, 3, 256, 256]]
        images = torch.rand(batch_size, 3, 256, 256, generator=generator)
        outputs = session.run(None, {"images": images.numpy()})
        with torch.no_grad():
            _, expected = scripted(list(images.unbind(0)))
        assert len(outputs) == 3 * batch_size
        for i, detections in enumerate(expected):
            boxes, scores, labels = outputs[3 * i : 3 * i + 3]
            assert len(scores) == len(detections["scores"]) > 0
            expected_rows = (detections[key].numpy() for key in ("boxes", "scores", "labels"))
            for box, score, label in zip(*expected_rows, strict=True):
                same = (labels == label) & (abs(scores - score) < 0.005) & (abs(boxes - box).max(1) < 0.5)
                assert same.any(), (i, box, score, label)


def test_onnxruntime_reuses_its_conversion_and_refuses_in_one_line_what_it_cannot_export(
    torch_run: dict, tmp_path: Path
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(torch_run["run_dir"], copy, ignore=shutil.ignore_patterns("checkpoints", "inference.*"))
    args = ("infer", str(copy), "--runtime", "onnxruntime", "--batch-sizes", "1", "--duration", "0.2s")
    reused = cli_in(torch_run["env"], *args, timeout=600)
    assert reused.returncode == 0, reused.stderr[-2000:]
    onnx = read_json(copy / "inference.json")["runtimes"][0]
    assert onnx["notes"] == ["reused model/model-batch1.onnx"] and onnx["cells"][0]["calls"] >= 3
    for path in (copy / "model").glob("*.onnx"):
        path.unlink()
    info = read_json(copy / "model" / "export.json")
    drifted = {**info, "config": {**info["config"], "rpn_post_nms_top_n_test": 3}}  # not the exported model
    (copy / "model" / "export.json").write_text(json.dumps(drifted))
    disagrees = cli_in(torch_run["env"], *args, timeout=600)
    assert disagrees.returncode == 1 and disagrees.stderr.count("\n") == 1, disagrees.stderr
    reason = read_json(copy / "inference.json")["runtimes"][0]["reason"]
    assert reason.startswith("the ONNX export disagrees with the model it was exported from: image 0, ")
    assert not list((copy / "model").glob("*.onnx"))  # a file that disagrees is never kept
    del info["config"]
    (copy / "model" / "export.json").write_text(json.dumps(info))
    refused = cli_in(torch_run["env"], *args, timeout=600)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.count("\n") == 1, refused.stderr
    reason = "model/export.json has no torch model config to rebuild the eager model for torch.onnx"
    assert reason in refused.stderr
    assert f"onnxruntime: cannot take this model: {reason}" in refused.stdout
    assert read_json(copy / "inference.json")["runtimes"][0]["reason"] == reason
    blocked = Path(torch_run["env"]["BLOCKED_IMPORT_LOG"])
    assert not blocked.exists(), f"the torch path tried to import: {blocked.read_text()}"


def test_sigterm_stops_with_a_checkpoint_and_the_run_resumes(torch_run: dict, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    command = [
        sys.executable,
        "-m",
        "training",
        "train",
        "--framework",
        "torch",
        "--run-dir",
        str(run_dir),
        "--dataset",
        str(torch_run["dataset"]),
        "--duration",
        "10m",
        "--checkpoint-every",
        "10ms",
    ]  # fmt: skip  (a checkpoint after every step: more than the 3 kept)
    process = subprocess.Popen(
        command, cwd=REPO, env=torch_run["env"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and process.poll() is None:
            csv_path = run_dir / "training.csv"
            if csv_path.exists() and len(csv_path.read_text().splitlines()) > 4:
                break
            time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 143, stderr[-2000:]
    info = read_json(run_dir / "training.json")
    assert info["status"] == "interrupted" and info["steps"] >= 4
    assert info["last_checkpoint"] == f"checkpoints/ckpt-{info['global_step']}.pt"
    stopped_at = info["global_step"]
    kept = sorted(int(p.stem.removeprefix("ckpt-")) for p in (run_dir / "checkpoints").glob("ckpt-*.pt"))
    assert kept == [stopped_at - 2, stopped_at - 1, stopped_at]  # the last 3 of one a step

    resumed = cli_in(torch_run["env"], *command[3:], "--max-steps", "2", "--no-infer")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    info = read_json(run_dir / "training.json")
    assert info["initial_step"] == stopped_at and info["resumed_from"] == f"checkpoints/ckpt-{stopped_at}.pt"
    assert info["global_step"] == stopped_at + 2
    steps = [int(row["step"]) for row in _rows(run_dir / "training.csv")]
    assert steps == list(range(1, stopped_at + 3))
    # --no-infer skips the inference phase only (the sequence is the same for both frameworks)
    phases = [row["phase"] for row in _rows(run_dir / "phases.csv")]
    assert phases == ["train", "train", "export", "evaluate", "detect"]
    assert not (run_dir / "inference.json").exists() and not (run_dir / "inference.csv").exists()
    assert read_json(run_dir / "eval.json")["global_step"] == stopped_at + 2


def test_evaluate_works_alone_on_an_existing_run(torch_run: dict, tmp_path: Path) -> None:
    """From the exported model alone (no checkpoints): the same code for both frameworks but the model's
    loader, which the TensorFlow run's own evaluate phase and its `infer` alone check."""
    copy = tmp_path / "copy"
    shutil.copytree(torch_run["run_dir"], copy, ignore=shutil.ignore_patterns("checkpoints", "eval.json"))
    done = cli_in(torch_run["env"], "evaluate", "--run-dir", str(copy), "--score-threshold", "0.0")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "mAP@0.5" in done.stdout
    report = read_json(copy / "eval.json")
    assert report["score_threshold"] == 0.0 and report["num_images"] == 3
    original = read_json(torch_run["run_dir"] / "eval.json")
    assert report["map_50"] == pytest.approx(original["map_50"], abs=1e-6)  # mAP ranks every score
    assert report["recall_50"] >= original["recall_50"]


def test_init_checkpoint_is_refused_for_torch(tmp_path: Path, no_tf_env: dict[str, str]) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    done = cli_in(no_tf_env, "train", "--framework", "torch", "--run-dir", str(tmp_path / "r"),
                "--init-checkpoint", str(ckpt))  # fmt: skip
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--framework tf" in lines[0]


def test_gpu_with_a_driver_but_no_cuda_in_torch_is_refused(
    tmp_path: Path, monkeypatch, frameworks_in_process: None
) -> None:
    """A driver is present (faked: the hardware boundary) but torch sees no GPU: refuse in one line."""
    from training import device

    marker = tmp_path / "version"
    marker.write_text("NVRM version: fake\n")
    monkeypatch.setattr(device, "DRIVER_MARKERS", (str(marker),))
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a usable GPU")
    with pytest.raises(device.DeviceError, match=r"torch.cuda.is_available\(\) is false"):
        device.prepare_torch_device("gpu")


def test_gpu_without_driver_fails_fast_for_torch(tmp_path: Path, no_tf_env: dict[str, str]) -> None:
    from training.device import nvidia_driver_present

    if nvidia_driver_present():
        pytest.skip("this machine has an NVIDIA driver")
    started = time.monotonic()
    done = cli_in(
        no_tf_env, "train", "--framework", "torch", "--device", "gpu", "--run-dir", str(tmp_path / "r")
    )
    assert done.returncode == 1 and time.monotonic() - started < 20
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "gpu" in lines[0].lower()
