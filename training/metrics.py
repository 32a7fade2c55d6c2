"""Detection quality at one IoU threshold: average precision, and recall/precision above a score."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

Box = Sequence[float]  # (ymin, xmin, ymax, xmax)


@dataclass(frozen=True)
class ImageResult:
    ground_truth: list[Box]
    boxes: list[Box]
    scores: list[float]


def iou(a: Box, b: Box) -> float:
    inter_h = min(a[2], b[2]) - max(a[0], b[0])
    inter_w = min(a[3], b[3]) - max(a[1], b[1])
    if inter_h <= 0 or inter_w <= 0:
        return 0.0
    inter = inter_h * inter_w
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return float(inter / union) if union > 0 else 0.0


def match_detections(result: ImageResult, iou_threshold: float) -> list[bool]:
    """Greedy by score, as in PASCAL VOC/COCO: True for each detection that claims an unclaimed target."""
    claimed = [False] * len(result.ground_truth)
    hits = [False] * len(result.boxes)
    for index in np.argsort(-np.asarray(result.scores, dtype=float), kind="stable"):
        best, best_iou = -1, iou_threshold
        for target, box in enumerate(result.ground_truth):
            overlap = iou(result.boxes[index], box)
            if not claimed[target] and overlap >= best_iou:
                best, best_iou = target, overlap
        if best >= 0:
            claimed[best] = True
            hits[index] = True
    return hits


def average_precision(results: list[ImageResult], iou_threshold: float = 0.5) -> float:
    """Area under the all-point interpolated precision/recall curve (PASCAL VOC 2010+)."""
    num_targets = sum(len(r.ground_truth) for r in results)
    if num_targets == 0:
        return 0.0
    scored = [
        (score, hit)
        for r in results
        for score, hit in zip(r.scores, match_detections(r, iou_threshold), strict=True)
    ]
    if not scored:
        return 0.0
    scored.sort(key=lambda pair: -pair[0])
    hits = np.array([hit for _, hit in scored], dtype=float)
    true_pos = np.cumsum(hits)
    recall = true_pos / num_targets
    precision = true_pos / np.arange(1, len(hits) + 1)
    recall = np.concatenate([[0.0], recall, [recall[-1]]])
    precision = np.concatenate([[1.0], precision, [0.0]])
    precision = np.maximum.accumulate(precision[::-1])[::-1]
    changes = np.nonzero(recall[1:] != recall[:-1])[0]
    return float(np.sum((recall[changes + 1] - recall[changes]) * precision[changes + 1]))


def recall_precision_at(
    results: list[ImageResult], score_threshold: float, iou_threshold: float = 0.5
) -> tuple[float, float, int, int]:
    """(recall, precision, true positives, detections kept) counting detections scoring >= score_threshold."""
    true_pos = kept = 0
    for r in results:
        keep = [i for i, s in enumerate(r.scores) if s >= score_threshold]
        subset = ImageResult(r.ground_truth, [r.boxes[i] for i in keep], [r.scores[i] for i in keep])
        true_pos += sum(match_detections(subset, iou_threshold))
        kept += len(keep)
    num_targets = sum(len(r.ground_truth) for r in results)
    recall = true_pos / num_targets if num_targets else 0.0
    precision = true_pos / kept if kept else 0.0
    return recall, precision, true_pos, kept
