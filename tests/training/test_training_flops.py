"""FLOPs per training example (training/flops.py): counted once per training, recorded in training.json as
`flops`, and counted after the fact for a recorded torch run by `python -m training flops RUN_DIR`."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from trainfixtures import REPO, cli_in, run_training_cli

from runformat import read_json
from training.flops import recorded_math_dtype

SMALL_GFLOP = 26.64  # the `small` model per training example (../shared/notes/gpu-headroom-facts.md: 26.6)
CPU_EXAMPLE = REPO / "data" / "examples" / "20261124T111406Z-cpu-vm"  # torch small, batch 2, CPU
H100_EXAMPLE = REPO / "data" / "examples" / "20261124T110829Z-gpu-vm"  # torch small, batch 2, H100 float32
H100 = "NVIDIA H100 80GB HBM3"
FLOPS_KEYS = {"per_example", "method", "counted_batch", "uncounted", "math_dtype"}


def _small_model(image_size: int):
    import torch

    from training.torch_model import build_model, model_config

    torch.manual_seed(0)
    return build_model({**model_config("small"), "image_size": image_size}).train()


def _count_small(image_size: int, batch: int = 1) -> dict:
    import torch

    from training.flops import count_torch_training, synthetic_torch_batch

    images, targets = synthetic_torch_batch(batch, 256)
    return count_torch_training(_small_model(image_size), images, targets, None, torch.device("cpu"))


@pytest.mark.slow
def test_a_small_torch_step_counts_the_same_twice_and_grows_with_its_pixels(
    frameworks_in_process: None,
) -> None:
    """The backbone's FLOPs grow with the pixel count, the RoI head's (128 sampled boxes) do not: the count
    is affine in the pixels, which a count of anything else (time, a constant, the side) would not be."""
    import torch

    from training.flops import count_torch_training, synthetic_torch_batch

    model = _small_model(256)
    images, targets = synthetic_torch_batch(2, 256)
    first, second = (
        count_torch_training(model, images, targets, None, torch.device("cpu")) for _ in range(2)
    )
    assert first["per_example"] == second["per_example"] == pytest.approx(SMALL_GFLOP * 1e9, rel=0.005)
    assert first["counted_batch"] == 2 and first["math_dtype"] == "float32" and "reason" not in first
    assert 0 < first["count_s"] < 20, first["count_s"]  # a few seconds on 2 shared cores
    assert first["method"].startswith("torch.utils.flop_counter.FlopCounterMode over one training step")
    assert all(p.grad is None for p in model.parameters())  # counted on a copy
    small, middle, large = (_count_small(size)["per_example"] for size in (128, 192, 256))
    assert large / small == pytest.approx(3.07, abs=0.05)  # 4x the pixels, less the fixed head
    expected_middle = small + (large - small) * (192**2 - 128**2) / (256**2 - 128**2)
    assert middle == pytest.approx(expected_middle, rel=0.01)


@pytest.mark.slow
def test_the_torch_count_leaves_the_training_as_it_would_have_been(
    tiny_dataset: Path, tmp_path: Path, frameworks_in_process: None
) -> None:
    """Same first batch, weights and random numbers (RPN and RoI sampling draw them) with the count as
    without: the same first-step losses and weights."""
    from training.torch_backend import TorchSession
    from training.trainer import TrainOptions

    def first_step(count: bool):
        options = TrainOptions(run_dir=tmp_path, dataset=tiny_dataset, framework="torch", seed=4)
        session = TorchSession(options, "cpu")
        session.restore_or_initialize(tmp_path / f"checkpoints-{count}")
        flops = session.count_flops() if count else None
        losses = session.resolve([session.step()])[0]
        return flops, losses, session.weights_digest()

    flops, counted_losses, counted_weights = first_step(True)
    _, losses, weights = first_step(False)
    assert counted_losses == losses and counted_weights == weights
    assert flops["per_example"] == pytest.approx(SMALL_GFLOP * 1e9, rel=0.005)
    assert {"torchvision::roi_align", "torchvision::nms"} <= set(flops["uncounted"])


def test_the_uncounted_ops_are_the_ones_the_step_ran(frameworks_in_process: None) -> None:
    """Found in the step, not from a list: a step without torchvision's ops names none of them."""
    import torch
    import torchvision

    from training.flops import count_torch_step

    class Boxes(torch.nn.Module):
        def __init__(self, with_nms: bool) -> None:
            super().__init__()
            self.linear, self.with_nms = torch.nn.Linear(4, 4), with_nms

        def forward(self, images, targets):
            boxes = self.linear(images[0]).abs().cumsum(-1)
            if self.with_nms:
                torchvision.ops.nms(boxes.detach(), boxes[:, 0].detach(), 0.5)
            return {"loss": boxes.sum()}

    images = [torch.rand(8, 4)]
    plain, plain_uncounted = count_torch_step(Boxes(False), images, None)
    with_nms, nms_uncounted = count_torch_step(Boxes(True), images, None)
    assert plain_uncounted == [] and nms_uncounted == ["torchvision::nms"]
    assert plain == with_nms == 2 * (2 * 8 * 4 * 4)  # addmm forward, the weights' mm backward


def test_torch_run_records_its_flops(torch_run: dict) -> None:
    info = read_json(torch_run["run_dir"] / "training.json")
    flops = info["flops"]
    assert set(flops) >= FLOPS_KEYS and "reason" not in flops
    assert flops["per_example"] == pytest.approx(SMALL_GFLOP * 1e9, rel=0.005)
    assert flops["counted_batch"] == info["per_device_batch_size"] == 2 and flops["math_dtype"] == "float32"
    assert {"torchvision::roi_align", "torchvision::_roi_align_backward", "torchvision::nms"} <= set(
        flops["uncounted"]
    )
    assert 0 < flops["count_s"] < min(20.0, info["setup_s"]), flops["count_s"]  # counted within setup


def test_the_sizing_of_a_real_cpu_run_gives_its_mfu_or_says_why_the_peak_is_unknown(torch_run: dict) -> None:
    from sizing.analysis.headroom import mfu_text
    from sizing.analysis.load import load_run_dir
    from sizing.analysis.run import analyse_run
    from sizing.model import Prices, Thresholds

    analysis = analyse_run(load_run_dir(torch_run["run_dir"]), Prices(), Thresholds())
    room = analysis.headroom
    assert analysis.kind == "cpu" and room is not None and room.achieved_flops_per_s
    system = read_json(torch_run["run_dir"] / "run.json")["system"]
    if system.get("cpu_max_mhz") and system.get("cpu_simd") and system.get("cpu_cores_physical"):
        assert room.mfu is not None and 0 < room.mfu < 1
        assert "nominal FP32 peak (MFU" in mfu_text(room)
    else:  # this VM states no clock (no cpufreq, none in the model name): unknown, never a guess
        assert room.mfu is None and "CPU" in (room.mfu_reason or "")
        assert mfu_text(room).startswith("MFU not known (")


@pytest.mark.slow
def test_a_count_that_fails_is_recorded_and_the_training_goes_on(
    tiny_dataset: Path, tmp_path: Path, monkeypatch, frameworks_in_process: None
) -> None:
    from torch.utils.flop_counter import FlopCounterMode

    from training.device import DeviceInfo
    from training.trainer import StopRequest, TrainOptions, train

    def refuse(self):
        raise RuntimeError("injected: no counter today")

    monkeypatch.setattr(FlopCounterMode, "__enter__", refuse)
    options = TrainOptions(
        run_dir=tmp_path / "run", dataset=tiny_dataset, framework="torch", max_steps=1, checkpoint_every_s=600
    )
    device = DeviceInfo(kind="cpu", used="CPU", gpu_names=[], tensorflow_devices=[])
    result = train(options, device, StopRequest(), time.time())
    assert result.status == "completed" and result.steps == 1
    flops = read_json(tmp_path / "run" / "training.json")["flops"]
    assert flops["per_example"] is None and flops["counted_batch"] is None and flops["uncounted"] == []
    assert flops["reason"] == "torch step not counted: RuntimeError: injected: no counter today"


def test_tensorflow_counts_the_convolutions_and_matmuls_of_the_ops_that_run(
    frameworks_in_process: None,
) -> None:
    """A conv and a dense layer, forward and weight gradients, and a loop that computes: the first conv's
    input gradient is built by the tape but never runs, and is not counted; the loop is named."""
    import tensorflow as tf

    from training.flops import count_tf_graph, count_tf_step, tf_math_dtype

    conv = tf.keras.layers.Conv2D(8, 3, padding="same")
    dense = tf.keras.layers.Dense(10)
    images = tf.random.uniform([1, 16, 16, 4])
    conv(images), dense(tf.zeros([1, 16 * 16 * 8]))

    @tf.function
    def step(images):
        with tf.GradientTape() as tape:
            features = tf.reshape(conv(images), [1, -1])
            _, scale = tf.while_loop(
                lambda i, s: i < 3, lambda i, s: (i + 1, s * 1.5), (0, 1.0), name="steps"
            )
            loss = tf.reduce_sum(dense(features)) * scale
        return loss, tape.gradient(loss, conv.trainable_variables + dense.trainable_variables)

    graph = step.get_concrete_function(images).graph
    total, uncounted = count_tf_graph(graph)
    conv_flops, dense_flops = 2 * 3 * 3 * 4 * 8 * 16 * 16, 2 * 2048 * 10
    assert total == 2 * conv_flops + 3 * dense_flops  # no input gradient for the first conv
    assert len(uncounted) == 1 and "While steps" in uncounted[0], uncounted
    flops = count_tf_step(step.get_concrete_function(images), 1, tf_math_dtype(tf, "cpu"))
    assert flops["per_example"] == total and flops["math_dtype"] == "float32" and flops["counted_batch"] == 1


@pytest.mark.slow
def test_tensorflow_run_records_its_flops(trained_run) -> None:
    info = read_json(trained_run.run_dir / "training.json")
    flops = info["flops"]
    assert set(flops) >= FLOPS_KEYS and "reason" not in flops, flops
    assert flops["per_example"] == pytest.approx(26.74e9, rel=0.01)  # torch's `small` twin: 26.64
    assert flops["counted_batch"] == info["batch_size"] and flops["math_dtype"] == "float32"
    assert any("multilevel_propose_rois" in name for name in flops["uncounted"]), flops["uncounted"]


@pytest.mark.parametrize(
    ("recorded", "expected"),
    [
        ({"precision": "float32", "device_used": H100, "gpu_names": [H100]}, None),  # the report's to say
        ({"precision": "bfloat16", "device_used": H100, "gpu_names": [H100]}, "bfloat16"),
        ({"precision": "float32", "device_used": "CPU", "gpu_names": ["NVIDIA L4"]}, "float32"),
    ],
)  # fmt: skip
def test_a_recorded_run_gets_the_dtype_its_math_ran_in(recorded: dict, expected: str | None) -> None:
    dtype, why = recorded_math_dtype(recorded)
    assert dtype == expected and why


def _copy(example: Path, tmp_path: Path) -> Path:
    copy = tmp_path / example.name
    shutil.copytree(example, copy, ignore=shutil.ignore_patterns("checkpoints", "model", "detections"))
    return copy


@pytest.mark.slow
def test_flops_counts_a_recorded_run_into_its_training_json(
    tmp_path: Path, no_tf_env: dict[str, str]
) -> None:
    copy = _copy(H100_EXAMPLE, tmp_path)
    before = read_json(copy / "training.json")
    before.pop("flops", None)
    (copy / "training.json").write_text(json.dumps(before, indent=2) + "\n")
    done = cli_in(no_tf_env, "flops", str(copy))
    assert done.returncode == 0, done.stderr[-2000:]
    after = read_json(copy / "training.json")
    flops = after.pop("flops")
    assert after == before  # nothing else changed
    assert flops["per_example"] == pytest.approx(SMALL_GFLOP * 1e9, rel=0.005) and flops["counted_batch"] == 2
    assert flops["math_dtype"] is None and "TF32 not recorded at run time" in flops["method"]
    assert "counted after the run, on " in flops["method"]
    assert "synthetic inputs of the recorded shape" in flops["method"]
    assert "torchvision::roi_align" in flops["uncounted"]


@pytest.mark.slow
def test_flops_dry_run_prints_and_writes_nothing(tmp_path: Path, no_tf_env: dict[str, str]) -> None:
    copy = _copy(CPU_EXAMPLE, tmp_path)
    recorded = (copy / "training.json").read_bytes()
    done = cli_in(no_tf_env, "flops", str(copy), "--dry-run")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["math_dtype"] == "float32"
    assert (copy / "training.json").read_bytes() == recorded


SMALL_CONFIG = {"architecture": "resnet18_fpn128", "image_size": 256}
UNCOUNTABLE = {
    "unknown framework": {"framework": "jax", "preset": "small"},
    "tensorflow": {"framework": "tensorflow", "preset": "small"},
    "a list": [{"framework": "torch"}],
    "no model config": {"framework": "torch", "preset": "small", "image_size": 256},
    "image size as text": {"framework": "torch", "config": {**SMALL_CONFIG, "image_size": "256"}},
    "negative batch": {"framework": "torch", "config": SMALL_CONFIG, "per_device_batch_size": -1},
}


@pytest.mark.parametrize("case", ["no such dir", "no training.json", *UNCOUNTABLE])
def test_flops_refuses_what_it_cannot_count_in_one_line(case: str, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    if case != "no such dir":
        run_dir.mkdir()
    if case in UNCOUNTABLE:
        (run_dir / "training.json").write_text(json.dumps(UNCOUNTABLE[case]))
    done = run_training_cli("flops", str(run_dir))
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    expected = {
        "no such dir": "no such run directory",
        "no training.json": "no training.json",
        "unknown framework": "unknown framework 'jax'",
        "tensorflow": "a TensorFlow run",
        "a list": "expected a JSON object",
        "no model config": "no torch model to rebuild: config.architecture is not one of",
        "image size as text": "config.image_size is '256', not a whole number >= 1",
        "negative batch": "per_device_batch_size is -1, not a whole number >= 1",
    }[case]
    assert expected in lines[0]
    recorded = run_dir / "training.json"
    assert not recorded.exists() or '"flops"' not in recorded.read_text()
