"""The pure-Python TFRecord and tf.Example codec (training/tfrecord.py) and the torch input batches."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from training.tfrecord import (
    RecordError,
    RecordWriter,
    crc32c,
    decode_example,
    encode_example,
    python_crc32c,
    read_record_file,
)


def test_crc32c_matches_the_standard_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0


def test_the_native_checksum_is_used_and_agrees_with_the_pure_python_one() -> None:
    import google_crc32c

    assert crc32c is google_crc32c.value and google_crc32c.implementation == "c"
    rng = np.random.default_rng(3)
    for size in (0, 1, 7, 8, 9, 4096, 100_003):
        data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        assert crc32c(data) == python_crc32c(data)
    assert python_crc32c(b"123456789") == 0xE3069283


def test_without_google_crc32c_the_pure_python_checksum_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    from training import tfrecord

    monkeypatch.setitem(sys.modules, "google_crc32c", None)  # as where it is not installed
    assert tfrecord._native_crc32c() is None


def test_example_round_trip_keeps_every_kind() -> None:
    features = {
        "image/encoded": ("bytes", [b"\x89PNG...", b""]),
        "image/object/bbox/xmin": ("float", [0.25, 0.5]),
        "image/object/class/label": ("int64", [1, -3, 2**40]),
        "image/object/area": ("float", []),
    }
    decoded = decode_example(encode_example(features))
    assert decoded == {key: values for key, (_, values) in features.items()}


def test_records_round_trip_and_corruption_is_caught(tmp_path: Path) -> None:
    path = tmp_path / "x.tfrecord"
    with RecordWriter(path) as writer:
        writer.write(b"first")
        writer.write(b"")
        writer.write(b"third" * 1000)
    assert list(read_record_file(path, verify=True)) == [b"first", b"", b"third" * 1000]
    data = bytearray(path.read_bytes())
    data[14] ^= 0xFF  # inside the first record's data
    path.write_bytes(bytes(data))
    with pytest.raises(RecordError, match="corrupted record data"):
        list(read_record_file(path, verify=True))
    path.write_bytes(bytes(data[:30]))
    with pytest.raises(RecordError):
        list(read_record_file(path))


@pytest.mark.slow
def test_tensorflow_reads_our_records_and_we_read_its(tmp_path: Path, frameworks_in_process: None) -> None:
    import tensorflow as tf

    ours = tmp_path / "ours.tfrecord"
    example = encode_example({"a": ("bytes", [b"xyz"]), "f": ("float", [1.5]), "i": ("int64", [-7, 300])})
    with RecordWriter(ours) as writer:
        writer.write(example)
    (record,) = list(tf.data.TFRecordDataset(str(ours)).as_numpy_iterator())
    parsed = tf.train.Example.FromString(record).features.feature
    assert parsed["a"].bytes_list.value == [b"xyz"] and list(parsed["i"].int64_list.value) == [-7, 300]
    theirs = tmp_path / "theirs.tfrecord"
    with tf.io.TFRecordWriter(str(theirs)) as writer:
        writer.write(record)
    assert decode_example(next(read_record_file(theirs, verify=True)))["f"] == [1.5]


def test_scale_and_crop_moves_boxes_with_the_pixels(frameworks_in_process: None) -> None:
    import torch

    from training.torch_data import Augment, _scale_and_crop

    image = torch.zeros(3, 100, 100)
    image[:, 40:60, 20:30] = 1.0  # a white box at x 20-30, y 40-60
    boxes, labels = np.array([[20, 40, 30, 60]], dtype=np.float32), np.array([1])
    for augment in (
        Augment(False, 1.25, (0.0, 0.0)),
        Augment(False, 1.25, (1.0, 0.5)),
        Augment(False, 0.8, (0, 0)),
    ):
        out, moved, kept = _scale_and_crop(image, boxes, labels, augment)
        assert out.shape == image.shape and kept.tolist() == [1]
        x1, y1, x2, y2 = moved[0]
        inside = out[0, int(y1) + 1 : int(y2) - 1, int(x1) + 1 : int(x2) - 1]
        assert float(inside.min()) > 0.9
        assert float(out[0].sum()) == pytest.approx((x2 - x1) * (y2 - y1), rel=0.1)
    _, gone, none = _scale_and_crop(image, np.array([[0, 0, 5, 5]], dtype=np.float32), labels,
                                    Augment(False, 1.25, (1.0, 1.0)))  # fmt: skip
    assert gone.shape == (0, 4) and none.shape == (0,)


def test_batches_are_a_function_of_seed_and_position(tiny_dataset: Path, frameworks_in_process: None) -> None:
    import torch

    from training.torch_data import TrainBatches

    cpu = torch.device("cpu")
    straight = TrainBatches(tiny_dataset, 2, seed=5, device=cpu)
    sequence = [straight.next() for _ in range(15)]  # crosses an epoch (24 images)
    images, targets = TrainBatches(tiny_dataset, 2, seed=5, device=cpu, first_step=13).next()
    expected_images, expected_targets = sequence[13]
    assert all(torch.equal(a, b) for a, b in zip(images, expected_images, strict=True))
    assert all(torch.equal(a["boxes"], b["boxes"]) for a, b in zip(targets, expected_targets, strict=True))
    other = TrainBatches(tiny_dataset, 2, seed=6, device=cpu).next()[0]
    assert not all(torch.equal(a, b) for a, b in zip(other, sequence[0][0], strict=True))


def test_preloaded_batches_are_the_same_batches(tiny_dataset: Path, frameworks_in_process: None) -> None:
    """`preload` (the images kept on a GPU) changes where the pixels live, not the batches; the batch's boxes
    and labels, copied over in one table, are each image's own."""
    import numpy as np
    import torch

    from training.torch_data import TrainBatches, _scale_and_crop

    cpu = torch.device("cpu")
    plain, preloaded = (TrainBatches(tiny_dataset, 3, seed=5, device=cpu, preload=p) for p in (False, True))
    for _ in range(9):  # crosses an epoch (24 images)
        host = plain.host_batch(plain.position)
        (images, targets), (again, again_targets) = plain.next(), preloaded.next()
        assert all(torch.equal(a, b) for a, b in zip(images, again, strict=True))
        for example, target, other in zip(host, targets, again_targets, strict=True):
            pixels = example.pixels.float().div_(255.0)
            _, boxes, labels = _scale_and_crop(pixels, example.boxes, example.labels, example.augment)
            assert np.array_equal(target["boxes"].numpy(), boxes) and target["boxes"].dtype == torch.float32
            assert np.array_equal(target["labels"].numpy(), labels) and target["labels"].dtype == torch.int64
            assert all(torch.equal(target[key], other[key]) for key in ("boxes", "labels"))
    assert preloaded.cache_limit_bytes < plain.cache_limit_bytes  # a GPU's memory is the scarcer
