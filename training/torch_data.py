"""Training batches for the PyTorch path, read from the same TFRecords without TensorFlow.

The order is a function of (seed, epoch) alone, so a resumed run continues where the checkpoint's
step left off. Like Model Garden's parser for this experiment, each image is flipped left-right with
probability 0.5; images keep their size (the model's transform resizes to the preset's size).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from training.records import TRAIN_PATTERN, LabeledImage, read_records, split_files

CACHE_LIMIT_BYTES = 2 * 1024**3  # decoded images kept in memory up to this much, then decoded per use


class TrainBatches:
    def __init__(self, dataset: Path, batch_size: int, seed: int, device: Any, first_step: int = 0) -> None:
        files = split_files(dataset, TRAIN_PATTERN)
        if not files:
            raise FileNotFoundError(f"{dataset}: no training split ({TRAIN_PATTERN})")
        self.items: list[LabeledImage] = list(read_records(files))
        if not self.items:
            raise ValueError(f"{dataset}: the training split has no images")
        self.batch_size, self.seed, self.device = batch_size, seed, device
        self.position = first_step * batch_size  # examples consumed so far, over all epochs
        self._cache: dict[int, Any] = {}
        self._cached_bytes = 0

    def next(self) -> tuple[list[Any], list[dict[str, Any]]]:
        images, targets = [], []
        for _ in range(self.batch_size):
            index, flip = self._pick(self.position)
            self.position += 1
            image, target = self._example(index, flip)
            images.append(image)
            targets.append(target)
        return images, targets

    def _pick(self, position: int) -> tuple[int, bool]:
        count = len(self.items)
        epoch, offset = divmod(position, count)
        rng = np.random.default_rng([self.seed, epoch])
        order = rng.permutation(count)
        flips = rng.random(count) < 0.5
        return int(order[offset]), bool(flips[offset])

    def _example(self, index: int, flip: bool) -> tuple[Any, dict[str, Any]]:
        import torch

        item = self.items[index]
        pixels = self._pixels(index)
        boxes = np.asarray(item.boxes, dtype=np.float32).reshape(-1, 4)[:, [1, 0, 3, 2]]  # -> x1 y1 x2 y2
        if flip:
            pixels = torch.flip(pixels, dims=[2])
            boxes = boxes.copy()
            boxes[:, [0, 2]] = item.width - boxes[:, [2, 0]]
        image = pixels.to(self.device, non_blocking=True).float().div_(255.0)
        target = {
            "boxes": torch.from_numpy(boxes).to(self.device, non_blocking=True),
            "labels": torch.as_tensor(item.labels, dtype=torch.int64).to(self.device, non_blocking=True),
        }
        return image, target

    def _pixels(self, index: int):
        """uint8 CHW tensor of one image, decoded once while the cache has room."""
        import torch

        cached = self._cache.get(index)
        if cached is not None:
            return cached
        pixels = torch.from_numpy(np.ascontiguousarray(self.items[index].decoded().transpose(2, 0, 1)))
        if self._cached_bytes + pixels.numel() <= CACHE_LIMIT_BYTES:
            self._cache[index] = pixels
            self._cached_bytes += pixels.numel()
        return pixels
