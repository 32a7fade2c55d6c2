"""Command-line behaviour: usage errors in one line, `--device gpu` failing fast, the COCO converter."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from trainfixtures import run_training_cli

from training.device import nvidia_driver_present
from training.records import read_records, split_files

no_gpu_here = pytest.mark.skipif(nvidia_driver_present(), reason="this machine has an NVIDIA driver")


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("training: error: ")
    return lines[0]


def test_train_without_run_dir_is_a_usage_error() -> None:
    done = run_training_cli("train", "--duration", "1m")
    assert done.returncode == 2
    assert "WORKBENCH_RUN_DIR" in _one_error_line(done.stderr)


@pytest.mark.parametrize(
    "args",
    [
        ["train", "--run-dir", "x", "--duration", "soon"],
        ["train", "--run-dir", "x", "--batch", "0"],
        ["train", "--run-dir", "x", "--device", "tpu"],
        ["train", "--run-dir", "x", "--dataset", "/nonexistent/dataset"],
        ["train", "--run-dir", "x", "--init-checkpoint", "/nonexistent/ckpt"],
        ["dataset", "--size", "12"],
        ["evaluate", "--run-dir", "/nonexistent/run"],
        ["frobnicate"],
    ],
)
def test_bad_arguments_exit_2_with_one_line(args: list[str], tmp_path: Path) -> None:
    done = run_training_cli(*[str(tmp_path / a) if a == "x" else a for a in args])
    assert done.returncode == 2, done.stderr
    _one_error_line(done.stderr)


@no_gpu_here
@pytest.mark.parametrize(
    "args",
    [
        ["devices", "--require", "gpu"],
        ["devices", "--require", "gpu", "--framework", "torch"],
        ["train", "--device", "gpu", "--duration", "1m"],
    ],
)
def test_gpu_requested_without_gpu_fails_fast_in_one_line(args: list[str], tmp_path: Path) -> None:
    if args[0] == "train":
        args = [*args, "--run-dir", str(tmp_path / "run")]
    started = time.monotonic()
    done = run_training_cli(*args)
    assert done.returncode == 1
    assert "gpu" in _one_error_line(done.stderr).lower()
    assert time.monotonic() - started < 20
    assert not (tmp_path / "run").exists()


def test_refuses_to_overwrite_a_dataset_without_force(tmp_path: Path) -> None:
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "keep.txt").write_text("mine")
    done = run_training_cli("dataset", "--out", str(tmp_path / "ds"), "--train", "1", "--val", "1")
    assert done.returncode == 2 and "--force" in _one_error_line(done.stderr)
    assert (tmp_path / "ds" / "keep.txt").read_text() == "mine"


def test_force_and_if_missing_together_are_refused_in_one_line(tmp_path: Path) -> None:
    """Replace it, or draw it only where missing: not both (a current dataset would be kept unsaid)."""
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "keep.txt").write_text("mine")
    done = run_training_cli("dataset", "--out", str(tmp_path / "ds"), "--force", "--if-missing")
    assert done.returncode == 2 and "not allowed with argument --force" in _one_error_line(done.stderr)
    assert (tmp_path / "ds" / "keep.txt").read_text() == "mine"


def _write_coco(root: Path) -> tuple[Path, Path]:
    images = root / "images"
    images.mkdir()
    rng = np.random.default_rng(0)
    entries = []
    for index, (fmt, size) in enumerate(
        [("PNG", (64, 48)), ("JPEG", (80, 60)), ("PNG", (50, 50)), ("JPEG", (40, 70))]
    ):
        name = f"img{index}.{'png' if fmt == 'PNG' else 'jpg'}"
        Image.fromarray(rng.integers(0, 255, size=(size[1], size[0], 3), dtype=np.uint8)).save(
            images / name, fmt
        )
        entries.append({"id": 10 + index, "file_name": name, "width": size[0], "height": size[1]})
    annotations = [
        {"id": 1, "image_id": 10, "category_id": 5, "bbox": [4, 6, 20, 10], "area": 200, "iscrowd": 0},
        {"id": 2, "image_id": 10, "category_id": 9, "bbox": [1, 1, 5, 5], "area": 25, "iscrowd": 0},
        {"id": 3, "image_id": 11, "category_id": 5, "bbox": [10, 10, 30, 20], "area": 600, "iscrowd": 0},
        {"id": 4, "image_id": 11, "category_id": 5, "bbox": [0, 0, 80, 60], "area": 4800, "iscrowd": 1},
        {"id": 5, "image_id": 13, "category_id": 5, "bbox": [30, 60, 20, 20], "area": 400, "iscrowd": 0},
    ]
    categories = [{"id": 5, "name": "cat"}, {"id": 9, "name": "dog"}]
    path = root / "instances.json"
    path.write_text(json.dumps({"images": entries, "annotations": annotations, "categories": categories}))
    return images, path


@pytest.mark.slow
def test_convert_coco_writes_our_record_format(tmp_path: Path) -> None:
    images, annotations = _write_coco(tmp_path)
    out = tmp_path / "converted"
    done = run_training_cli("convert-coco", "--images", str(images), "--annotations", str(annotations),
                            "--out", str(out), "--category", "cat", "--val-fraction", "0.25")  # fmt: skip
    assert done.returncode == 0, done.stderr
    info = json.loads((out / "dataset.json").read_text())
    assert info["classes"] == {"1": "cat"}
    assert (info["splits"]["train"]["images"], info["splits"]["val"]["images"]) == (3, 1)
    items = list(read_records(split_files(out, "train*.tfrecord"))) + list(
        read_records(split_files(out, "val*.tfrecord"))
    )
    by_file = dict(
        zip(
            info["splits"]["train"]["source_files"] + info["splits"]["val"]["source_files"],
            items,
            strict=True,
        )
    )
    assert [item.image_id for item in items] == ["train_0000", "train_0001", "train_0002", "val_0000"]
    assert by_file["img0.png"].boxes == [pytest.approx((6.0, 4.0, 16.0, 24.0))]  # the dog is another category
    assert by_file["img1.jpg"].boxes == [pytest.approx((10.0, 10.0, 30.0, 40.0))]  # the crowd box is skipped
    assert by_file["img2.png"].boxes == []
    assert by_file["img3.jpg"].boxes == [pytest.approx((60.0, 30.0, 70.0, 40.0))]  # clipped to 40x70
    assert (by_file["img3.jpg"].width, by_file["img3.jpg"].height) == (40, 70)
    assert all(label == 1 for item in items for label in item.labels)
    assert by_file["img1.jpg"].encoded == (images / "img1.jpg").read_bytes()
    assert by_file["img0.png"].decoded().shape == (48, 64, 3)


def test_convert_coco_needs_a_category_when_there_are_several(tmp_path: Path) -> None:
    images, annotations = _write_coco(tmp_path)
    done = run_training_cli("convert-coco", "--images", str(images), "--annotations", str(annotations),
                            "--out", str(tmp_path / "out"))  # fmt: skip
    assert done.returncode == 2
    assert "--category" in _one_error_line(done.stderr)
    assert not (tmp_path / "out").exists()


@no_gpu_here
@pytest.mark.slow
def test_gpu_with_a_driver_but_no_gpu_in_tensorflow_is_refused(
    tmp_path: Path, monkeypatch, frameworks_in_process: None
) -> None:
    """A driver is present (faked: the hardware boundary) but TensorFlow sees no GPU: refuse, no fallback."""
    from training import device

    marker = tmp_path / "version"
    marker.write_text("NVRM version: fake\n")
    monkeypatch.setattr(device, "DRIVER_MARKERS", (str(marker),))
    assert device.nvidia_driver_present()
    with pytest.raises(device.DeviceError, match="sees no GPU"):
        device.prepare_device("gpu")


def test_train_infer_duration_sets_the_inference_phase_cells(tmp_path: Path) -> None:
    from training.cli import _parser
    from training.inference.command import phase_options
    from training.inference.measure import PHASE_BATCH_SIZES, PHASE_DURATION_S

    base = ["train", "--framework", "torch", "--run-dir", str(tmp_path)]
    chosen = phase_options(_parser().parse_args([*base, "--infer-duration", "0.5s"]), tmp_path)
    default = phase_options(_parser().parse_args(base), tmp_path)
    assert chosen is not None and default is not None
    assert (chosen.duration_s, default.duration_s) == (0.5, PHASE_DURATION_S)
    assert chosen.batch_sizes == default.batch_sizes == PHASE_BATCH_SIZES
    assert phase_options(_parser().parse_args([*base, "--no-infer"]), tmp_path) is None
