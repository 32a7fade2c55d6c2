"""The check that keeps a torch.onnx export only if it agrees with the model it was exported from."""

from __future__ import annotations

import numpy as np
import pytest

from training.inference.runtimes.base import CannotTake
from training.inference.runtimes.torch_onnx import BOX_TOLERANCE_PX, SCORE_TOLERANCE, compare

THRESHOLD = 0.05


def _detections(*rows: tuple[float, float, float, float, float, int]):
    boxes = np.array([row[:4] for row in rows], dtype=np.float32).reshape(-1, 4)
    scores = np.array([row[4] for row in rows], dtype=np.float32)
    labels = np.array([row[5] for row in rows], dtype=np.int64)
    return boxes, scores, labels


REFERENCE = [
    _detections((10, 10, 40, 50, 0.9, 1), (100, 20, 130, 60, 0.4, 1)),
    _detections(),
]


def test_the_same_detections_in_another_order_agree() -> None:
    candidate = [_detections((100, 20, 130.2, 60, 0.401, 1), (10, 10, 40, 50, 0.9, 1)), _detections()]
    agreement = compare(REFERENCE, candidate, THRESHOLD)
    assert agreement.images == 2 and agreement.detections == 2
    assert agreement.max_box_diff_px == pytest.approx(0.2, abs=1e-4)
    assert agreement.max_score_diff == pytest.approx(0.001, abs=1e-5)
    assert "agrees with TorchScript on the 2 image(s)" in agreement.describe("TorchScript")


def test_a_box_off_by_more_than_the_tolerance_is_refused_in_one_line() -> None:
    shifted = 50 + BOX_TOLERANCE_PX + 0.5
    candidate = [_detections((10, 10, 40, shifted, 0.9, 1), (100, 20, 130, 60, 0.4, 1)), _detections()]
    with pytest.raises(CannotTake) as refused:
        compare(REFERENCE, candidate, THRESHOLD)
    message = str(refused.value)
    assert "\n" not in message and "image 0" in message and "score 0.900" in message
    assert message.startswith("the ONNX export disagrees with the model it was exported from")


@pytest.mark.parametrize(
    "candidate",
    [
        [
            _detections((10, 10, 40, 50, 0.9 - 2 * SCORE_TOLERANCE, 1), (100, 20, 130, 60, 0.4, 1)),
            _detections(),
        ],
        [_detections((10, 10, 40, 50, 0.9, 2), (100, 20, 130, 60, 0.4, 1)), _detections()],
        [_detections((10, 10, 40, 50, 0.9, 1)), _detections()],
    ],
    ids=["score", "label", "missing"],
)
def test_a_different_score_label_or_a_missing_detection_is_refused(candidate) -> None:
    with pytest.raises(CannotTake, match="has no counterpart from ONNX"):
        compare(REFERENCE, candidate, THRESHOLD)


def test_an_extra_detection_in_the_export_is_refused_too() -> None:
    candidate = [
        _detections((10, 10, 40, 50, 0.9, 1), (100, 20, 130, 60, 0.4, 1), (0, 0, 9, 9, 0.3, 1)),
        _detections(),
    ]
    with pytest.raises(CannotTake, match=r"image 0, ONNX detection \(score 0.300.* from TorchScript"):
        compare(REFERENCE, candidate, THRESHOLD)


def test_a_detection_at_the_models_own_threshold_may_be_missing_on_one_side() -> None:
    """Float noise may put a detection on either side of the score cut the model makes itself."""
    borderline = THRESHOLD + SCORE_TOLERANCE / 2
    reference = [_detections((10, 10, 40, 50, 0.9, 1), (60, 60, 70, 70, borderline, 1))]
    assert compare(reference, [_detections((10, 10, 40, 50, 0.9, 1))], THRESHOLD).detections == 1


def test_a_different_number_of_images_is_refused() -> None:
    with pytest.raises(CannotTake, match="returned 1 images' detections for 2"):
        compare(REFERENCE, REFERENCE[:1], THRESHOLD)
