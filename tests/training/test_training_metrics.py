"""Average precision and thresholded recall/precision on hand-checked cases."""

from __future__ import annotations

import pytest

from training.metrics import ImageResult, average_precision, iou, match_detections, recall_precision_at

TARGET = [10.0, 10.0, 30.0, 20.0]
ELSEWHERE = [100.0, 100.0, 120.0, 110.0]


def test_iou() -> None:
    assert iou(TARGET, TARGET) == 1.0
    assert iou(TARGET, ELSEWHERE) == 0.0
    assert iou([0, 0, 10, 10], [0, 5, 10, 15]) == pytest.approx(50 / 150)


def test_perfect_detection_scores_one() -> None:
    results = [ImageResult([TARGET], [TARGET], [0.9])]
    assert average_precision(results) == 1.0
    assert recall_precision_at(results, 0.5) == (1.0, 1.0, 1, 1)


def test_no_detection_scores_zero() -> None:
    results = [ImageResult([TARGET], [], [])]
    assert average_precision(results) == 0.0
    assert recall_precision_at(results, 0.5) == (0.0, 0.0, 0, 0)


def test_false_positive_ranked_first_halves_precision() -> None:
    results = [ImageResult([TARGET], [ELSEWHERE, TARGET], [0.9, 0.8])]
    assert average_precision(results) == pytest.approx(0.5)


def test_two_images_one_found() -> None:
    results = [ImageResult([TARGET], [TARGET], [0.7]), ImageResult([TARGET], [ELSEWHERE], [0.6])]
    assert average_precision(results) == pytest.approx(0.5)
    recall, precision, hits, kept = recall_precision_at(results, 0.5)
    assert (recall, precision, hits, kept) == (0.5, 0.5, 1, 2)


def test_score_threshold_drops_low_scores() -> None:
    results = [ImageResult([TARGET], [TARGET], [0.3])]
    assert recall_precision_at(results, 0.5) == (0.0, 0.0, 0, 0)
    assert average_precision(results) == 1.0


def test_duplicate_detections_count_once() -> None:
    result = ImageResult([TARGET], [TARGET, [10.0, 10.0, 29.0, 20.0]], [0.9, 0.8])
    assert match_detections(result, 0.5) == [True, False]
    assert recall_precision_at([result], 0.5)[:2] == (1.0, 0.5)
