"""tf.Example records in the layout Model Garden's TfExampleDecoder reads, and reading them back.

No TensorFlow here: the PyTorch path and the dataset generator run where it is not installed.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from training.tfrecord import RecordWriter, decode_example, encode_example, read_record_file

TRAIN_PATTERN = "train*.tfrecord"
VAL_PATTERN = "val*.tfrecord"
DATASET_JSON = "dataset.json"


@dataclass(frozen=True)
class LabeledImage:
    image_id: str
    encoded: bytes  # PNG or JPEG
    width: int
    height: int
    boxes: list[tuple[float, float, float, float]]  # (ymin, xmin, ymax, xmax) in pixels
    labels: list[int]

    def decoded(self) -> np.ndarray:
        return np.asarray(Image.open(io.BytesIO(self.encoded)).convert("RGB"))


def encode_png(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG", compress_level=6)
    return buffer.getvalue()


def to_tf_example(item: LabeledImage) -> bytes:
    """Serialized tf.train.Example with normalised boxes, labels, areas and crowd flags."""
    ymin, xmin, ymax, xmax = (
        [float(box[i]) / (item.height if i % 2 == 0 else item.width) for box in item.boxes] for i in range(4)
    )
    areas = [float((b[2] - b[0]) * (b[3] - b[1])) for b in item.boxes]
    image_format = b"png" if item.encoded[:4] == b"\x89PNG" else b"jpeg"
    return encode_example(
        {
            "image/encoded": ("bytes", [item.encoded]),
            "image/format": ("bytes", [image_format]),
            "image/source_id": ("bytes", [item.image_id.encode()]),
            "image/height": ("int64", [item.height]),
            "image/width": ("int64", [item.width]),
            "image/object/bbox/ymin": ("float", ymin),
            "image/object/bbox/xmin": ("float", xmin),
            "image/object/bbox/ymax": ("float", ymax),
            "image/object/bbox/xmax": ("float", xmax),
            "image/object/class/label": ("int64", list(item.labels)),
            "image/object/area": ("float", areas),
            "image/object/is_crowd": ("int64", [0] * len(item.boxes)),
        }
    )


def write_records(path: Path, items: Iterator[LabeledImage]) -> int:
    count = 0
    with RecordWriter(path) as writer:
        for item in items:
            writer.write(to_tf_example(item))
            count += 1
    return count


def read_records(paths: list[Path]) -> Iterator[LabeledImage]:
    """The labeled images stored in `paths`, in file order (no TensorFlow needed)."""
    for path in paths:
        for record in read_record_file(path):
            yield from_tf_example(record)


def from_tf_example(record: bytes) -> LabeledImage:
    feature = decode_example(record)
    height = int(feature["image/height"][0])
    width = int(feature["image/width"][0])
    coords = [feature.get(f"image/object/bbox/{k}", []) for k in ("ymin", "xmin", "ymax", "xmax")]
    boxes = [
        (ymin * height, xmin * width, ymax * height, xmax * width)
        for ymin, xmin, ymax, xmax in zip(*coords, strict=True)
    ]
    source_id = feature["image/source_id"][0]
    encoded = feature["image/encoded"][0]
    assert isinstance(source_id, bytes) and isinstance(encoded, bytes)
    return LabeledImage(
        image_id=source_id.decode(),
        encoded=encoded,
        width=width,
        height=height,
        boxes=boxes,
        labels=[int(label) for label in feature.get("image/object/class/label", [])],
    )


def split_files(dataset_dir: Path, pattern: str) -> list[Path]:
    return sorted(p for p in Path(dataset_dir).glob(pattern) if p.is_file())
