"""`python -m training dataset`: write the synthetic find-the-target dataset as TFRecords."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from runformat import read_json, write_json_atomic
from training.records import DATASET_JSON, LabeledImage, encode_png, write_records
from training.synth import DIFFICULTIES, make_scene, scene_rng

GENERATOR_VERSION = 2  # bump when the same arguments would draw different images
TARGET_CLASS = 1
TARGET_NAME = "waldo"


def synthetic_images(split: str, count: int, size: int, seed: int, difficulty: str) -> Iterator[LabeledImage]:
    level = DIFFICULTIES[difficulty]
    for index in range(count):
        scene = make_scene(scene_rng(seed, split, index), size, level)
        yield LabeledImage(
            image_id=f"{split}_{index:04d}",
            encoded=encode_png(scene.image),
            width=size,
            height=size,
            boxes=scene.boxes,
            labels=[TARGET_CLASS] * len(scene.boxes),
        )


def generate_dataset(
    out: Path, *, size: int = 256, train: int = 256, val: int = 32, seed: int = 0, difficulty: str = "hard"
) -> dict:
    """Write train.tfrecord, val.tfrecord and dataset.json into `out` (replacing it), atomically."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.tmp-{time.time_ns()}"
    staging.mkdir()
    try:
        started = time.time()
        counts = {
            split: write_records(
                staging / f"{split}.tfrecord", synthetic_images(split, n, size, seed, difficulty)
            )
            for split, n in (("train", train), ("val", val))
        }
        info = {
            "format_version": 1,
            "kind": "synthetic",
            "generator_version": GENERATOR_VERSION,
            "seed": seed,
            "image_size": size,
            "difficulty": difficulty,
            "classes": {str(TARGET_CLASS): TARGET_NAME},
            "splits": {split: {"file": f"{split}.tfrecord", "images": n} for split, n in counts.items()},
            "generated_unix": time.time(),
            "generation_s": round(time.time() - started, 2),
        }
        write_json_atomic(staging / DATASET_JSON, info)
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
        return info
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def is_current_synthetic(path: Path) -> bool:
    """True unless `path` holds a synthetic dataset drawn by an older generator."""
    info = dataset_info(path)
    return info.get("kind") != "synthetic" or info.get("generator_version") == GENERATOR_VERSION


def dataset_info(path: Path) -> dict:
    try:
        return read_json(Path(path) / DATASET_JSON)
    except ValueError:
        return {}


def why_draw(path: Path) -> str | None:
    """Why the dataset at `path` must be drawn: none is there, or one drawn by an older generator; None when
    the one there is current."""
    if not is_dataset(path):
        return f"no dataset at {path}"
    if not is_current_synthetic(path):
        return f"{path} was drawn by an older generator"
    return None


def is_dataset(path: Path) -> bool:
    return (Path(path) / DATASET_JSON).is_file() or any(Path(path).glob("train*.tfrecord"))
