"""`python -m training convert-coco`: COCO-format annotations of one category into our TFRecord layout."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from runformat import write_json_atomic
from training.records import DATASET_JSON, LabeledImage, write_records

TARGET_CLASS = 1
ENCODINGS_KEPT = {"PNG", "JPEG"}


class CocoError(ValueError):
    """The COCO input is unusable; the message is one line for the user."""


def convert_coco(
    images_dir: Path,
    annotations: Path,
    out: Path,
    *,
    category: str | None = None,
    val_fraction: float = 0.1,
    seed: int = 0,
) -> dict:
    """Write train/val TFRecords and dataset.json; the category becomes class 1, crowds are skipped."""
    coco = _load(annotations)
    category_id, category_name = _pick_category(coco, category)
    images = sorted(coco["images"], key=lambda image: image["id"])
    if not images:
        raise CocoError(f"{annotations}: no images")
    boxes_by_image: dict[int, list[tuple[float, float, float, float]]] = {}
    for annotation in coco.get("annotations", []):
        if annotation.get("category_id") == category_id and not annotation.get("iscrowd", 0):
            x, y, w, h = (float(v) for v in annotation["bbox"])
            if w > 0 and h > 0:
                boxes_by_image.setdefault(annotation["image_id"], []).append((y, x, y + h, x + w))
    order = np.random.default_rng(seed).permutation(len(images))
    val_count = min(len(images) - 1, max(1, round(len(images) * val_fraction))) if len(images) > 1 else 0
    splits = {
        "val": [images[i] for i in sorted(order[:val_count])],
        "train": [images[i] for i in sorted(order[val_count:])],
    }

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.tmp-{time.time_ns()}"
    staging.mkdir()
    try:
        counts = {
            split: write_records(
                staging / f"{split}.tfrecord", _labeled(members, split, Path(images_dir), boxes_by_image)
            )
            for split, members in splits.items()
        }
        info = {
            "format_version": 1,
            "kind": "coco",
            "source_annotations": str(annotations),
            "source_images": str(images_dir),
            "category": category_name,
            "classes": {str(TARGET_CLASS): category_name},
            "seed": seed,
            "splits": {
                split: {
                    "file": f"{split}.tfrecord",
                    "images": n,
                    "source_files": [m["file_name"] for m in splits[split]],
                }
                for split, n in counts.items()
            },
            "generated_unix": time.time(),
        }
        write_json_atomic(staging / DATASET_JSON, info)
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
        return info
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _load(annotations: Path) -> dict:
    try:
        coco = json.loads(Path(annotations).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CocoError(f"{annotations}: cannot read COCO JSON ({' '.join(str(exc).split())})") from exc
    if not isinstance(coco, dict) or not isinstance(coco.get("images"), list):
        raise CocoError(f"{annotations}: not COCO instances JSON (no 'images' list)")
    if not isinstance(coco.get("categories"), list) or not coco["categories"]:
        raise CocoError(f"{annotations}: no 'categories'")
    return coco


def _pick_category(coco: dict, wanted: str | None) -> tuple[int, str]:
    categories = {c["name"]: c["id"] for c in coco["categories"]}
    if wanted is None:
        if len(categories) != 1:
            raise CocoError(
                f"{len(categories)} categories ({', '.join(sorted(categories))}): "
                "choose one with --category NAME"
            )
        wanted = next(iter(categories))
    if wanted not in categories:
        raise CocoError(f"no category {wanted!r}; there are: {', '.join(sorted(categories))}")
    return categories[wanted], wanted


def _labeled(
    members: list[dict],
    split: str,
    images_dir: Path,
    boxes_by_image: dict[int, list[tuple[float, float, float, float]]],
) -> Iterator[LabeledImage]:
    for index, image in enumerate(members):
        path = images_dir / image["file_name"]
        encoded, width, height = _encoded(path)
        boxes = [_clipped(box, width, height) for box in boxes_by_image.get(image["id"], [])]
        yield LabeledImage(f"{split}_{index:04d}", encoded, width, height, boxes, [TARGET_CLASS] * len(boxes))


def _encoded(path: Path) -> tuple[bytes, int, int]:
    """The file's bytes if PNG or JPEG (re-encoded as PNG otherwise), with its size."""
    import io

    try:
        with Image.open(path) as image:
            width, height = image.size
            if image.format in ENCODINGS_KEPT and image.mode in ("RGB", "L"):
                return path.read_bytes(), width, height
            buffer = io.BytesIO()
            image.convert("RGB").save(buffer, format="PNG")
            return buffer.getvalue(), width, height
    except (OSError, UnidentifiedImageError) as exc:
        raise CocoError(f"{path}: cannot read image ({' '.join(str(exc).split())})") from exc


def _clipped(
    box: tuple[float, float, float, float], width: int, height: int
) -> tuple[float, float, float, float]:
    ymin, xmin, ymax, xmax = box
    return (
        min(max(ymin, 0.0), height),
        min(max(xmin, 0.0), width),
        min(max(ymax, 0.0), height),
        min(max(xmax, 0.0), width),
    )
