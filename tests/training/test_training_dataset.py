"""The synthetic dataset: deterministic scenes, and records Model Garden's decoder reads back."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from training.records import read_records, split_files
from training.synth import DIFFICULTIES, make_scene, scene_rng


def test_scenes_are_a_function_of_seed_split_and_index() -> None:
    first = make_scene(scene_rng(3, "train", 5), 256, DIFFICULTIES["hard"])
    again = make_scene(scene_rng(3, "train", 5), 256, DIFFICULTIES["hard"])
    other_seed = make_scene(scene_rng(4, "train", 5), 256, DIFFICULTIES["hard"])
    other_split = make_scene(scene_rng(3, "val", 5), 256, DIFFICULTIES["hard"])
    assert np.array_equal(first.image, again.image) and first.boxes == again.boxes
    assert not np.array_equal(first.image, other_seed.image)
    assert not np.array_equal(first.image, other_split.image)


@pytest.mark.parametrize("level", sorted(DIFFICULTIES))
def test_one_small_target_inside_the_image(level: str) -> None:
    difficulty = DIFFICULTIES[level]
    for index in range(20):
        scene = make_scene(scene_rng(0, "train", index), 256, difficulty)
        assert scene.image.shape == (256, 256, 3) and scene.image.dtype == np.uint8
        [(ymin, xmin, ymax, xmax)] = scene.boxes
        assert 0 <= ymin < ymax <= 256 and 0 <= xmin < xmax <= 256
        low, high = difficulty.target_height
        assert low - 1 <= ymax - ymin <= high + 1


@pytest.mark.parametrize("size", [64, 96, 128])
@pytest.mark.parametrize("level", sorted(DIFFICULTIES))
def test_small_images_draw_every_figure_whole(size: int, level: str) -> None:
    """`training dataset --size 64` (the smallest it accepts) draws scaled-down figures that still fit."""
    for index in range(10):
        scene = make_scene(scene_rng(0, "train", index), size, DIFFICULTIES[level])
        [(ymin, xmin, ymax, xmax)] = scene.boxes
        assert scene.image.shape == (size, size, 3)
        assert 0 <= ymin < ymax <= size and 0 <= xmin < xmax <= size


def test_target_wears_red_and_white_stripes_over_blue_legs() -> None:
    scene = make_scene(scene_rng(0, "val", 1), 256, DIFFICULTIES["easy"])
    ymin, xmin, ymax, xmax = (int(v) for v in scene.boxes[0])
    patch = scene.image[ymin:ymax, xmin:xmax].astype(int)
    reddish = (patch[..., 0] > 150) & (patch[..., 1] < 90) & (patch[..., 2] < 100)
    whitish = patch.min(axis=-1) > 200
    bluish = (patch[..., 2] > 120) & (patch[..., 0] < 90)
    assert reddish.sum() > 10 and whitish.sum() > 10 and bluish.sum() > 10


def test_harder_levels_have_smaller_targets_and_more_lookalikes() -> None:
    easy, medium, hard = (DIFFICULTIES[name] for name in ("easy", "medium", "hard"))
    assert easy.target_height[1] > medium.target_height[1] > hard.target_height[1]
    assert easy.distractors[1] < medium.distractors[1] < hard.distractors[1]
    assert easy.shared_feature_weights[2] < hard.shared_feature_weights[2]


@pytest.mark.slow
def test_model_garden_decoder_reads_our_records(tiny_dataset: Path, frameworks_in_process: None) -> None:
    import tensorflow as tf
    from official.vision.dataloaders.tf_example_decoder import TfExampleDecoder

    info = json.loads((tiny_dataset / "dataset.json").read_text())
    assert info["splits"]["train"]["images"] == 24 and info["splits"]["val"]["images"] == 4
    ours = list(read_records(split_files(tiny_dataset, "train*.tfrecord")))
    decoder = TfExampleDecoder()
    records = tf.data.TFRecordDataset(str(tiny_dataset / "train.tfrecord"))
    decoded = [decoder.decode(record) for record in records]
    assert len(decoded) == len(ours) == 24
    for index, (item, parsed) in enumerate(zip(ours, decoded, strict=True)):
        assert parsed["source_id"].numpy().decode() == item.image_id == f"train_{index:04d}"
        assert tuple(parsed["image"].shape) == (256, 256, 3)
        assert np.array_equal(parsed["image"].numpy(), item.decoded())
        assert parsed["groundtruth_classes"].numpy().tolist() == [1]
        assert parsed["groundtruth_is_crowd"].numpy().tolist() == [False]
        expected = np.asarray(item.boxes, dtype=np.float32) / 256.0
        np.testing.assert_allclose(parsed["groundtruth_boxes"].numpy(), expected, atol=1e-6)
    val_ids = [item.image_id for item in read_records(split_files(tiny_dataset, "val*.tfrecord"))]
    assert val_ids == ["val_0000", "val_0001", "val_0002", "val_0003"]


def test_only_stale_synthetic_datasets_count_as_outdated(tmp_path: Path) -> None:
    from training.dataset import GENERATOR_VERSION, is_current_synthetic

    cases = {
        "old": {"kind": "synthetic", "generator_version": GENERATOR_VERSION - 1},
        "current": {"kind": "synthetic", "generator_version": GENERATOR_VERSION},
        "coco": {"kind": "coco"},
    }
    for name, info in cases.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "dataset.json").write_text(json.dumps(info))
    assert not is_current_synthetic(tmp_path / "old")
    assert is_current_synthetic(tmp_path / "current")
    assert is_current_synthetic(tmp_path / "coco")
