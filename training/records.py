"""tf.Example records in the layout Model Garden's TfExampleDecoder reads, and reading them back."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

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
    import tensorflow as tf

    ymin, xmin, ymax, xmax = (
        [float(box[i]) / (item.height if i % 2 == 0 else item.width) for box in item.boxes] for i in range(4)
    )
    areas = [float((b[2] - b[0]) * (b[3] - b[1])) for b in item.boxes]
    image_format = b"png" if item.encoded[:4] == b"\x89PNG" else b"jpeg"

    def floats(values: list[float]) -> tf.train.Feature:
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))

    def ints(values: list[int]) -> tf.train.Feature:
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    def raw(value: bytes) -> tf.train.Feature:
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))

    features = {
        "image/encoded": raw(item.encoded),
        "image/format": raw(image_format),
        "image/source_id": raw(item.image_id.encode()),
        "image/height": ints([item.height]),
        "image/width": ints([item.width]),
        "image/object/bbox/ymin": floats(ymin),
        "image/object/bbox/xmin": floats(xmin),
        "image/object/bbox/ymax": floats(ymax),
        "image/object/bbox/xmax": floats(xmax),
        "image/object/class/label": ints(list(item.labels)),
        "image/object/area": floats(areas),
        "image/object/is_crowd": ints([0] * len(item.boxes)),
    }
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def write_records(path: Path, items: Iterator[LabeledImage]) -> int:
    import tensorflow as tf

    count = 0
    with tf.io.TFRecordWriter(str(path)) as writer:
        for item in items:
            writer.write(to_tf_example(item))
            count += 1
    return count


def read_records(paths: list[Path]) -> Iterator[LabeledImage]:
    """The labeled images stored in `paths`, in file order."""
    import tensorflow as tf

    for path in paths:
        for record in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
            yield _from_tf_example(tf.train.Example.FromString(record))


def _from_tf_example(example) -> LabeledImage:
    feature = example.features.feature

    def floats(key: str) -> list[float]:
        return list(feature[key].float_list.value)

    height = int(feature["image/height"].int64_list.value[0])
    width = int(feature["image/width"].int64_list.value[0])
    coords = [floats(f"image/object/bbox/{k}") for k in ("ymin", "xmin", "ymax", "xmax")]
    boxes = [
        (ymin * height, xmin * width, ymax * height, xmax * width)
        for ymin, xmin, ymax, xmax in zip(*coords, strict=True)
    ]
    return LabeledImage(
        image_id=feature["image/source_id"].bytes_list.value[0].decode(),
        encoded=feature["image/encoded"].bytes_list.value[0],
        width=width,
        height=height,
        boxes=boxes,
        labels=list(feature["image/object/class/label"].int64_list.value),
    )


def split_files(dataset_dir: Path, pattern: str) -> list[Path]:
    return sorted(p for p in Path(dataset_dir).glob(pattern) if p.is_file())
