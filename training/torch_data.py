"""Training batches for the PyTorch path, read from the same TFRecords without TensorFlow.

The order and the augmentation are a function of (seed, epoch) alone, so a resumed run continues
where the checkpoint's step left off. Like Model Garden's parser for this experiment
(`aug_rand_hflip=True, aug_scale_min=0.8, aug_scale_max=1.25`), each image is flipped left-right with
probability 0.5 and scaled by a random factor in [0.8, 1.25], then cropped at a random offset (or
padded at the bottom and right) back to its size; boxes follow, clipped, and those cut away dropped.
The model's own transform then resizes to the preset's size.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from training.records import TRAIN_PATTERN, LabeledImage, read_records, split_files

CACHE_LIMIT_BYTES = 2 * 1024**3  # decoded images kept in memory up to this much, then decoded per use
# With `preload`, decoded images are kept on the GPU instead, up to this much of its memory: no copy from
# pageable host memory per image (each such copy waits for the GPU's queue to drain before it starts).
DEVICE_CACHE_LIMIT_BYTES = 1024**3
SCALE_RANGE = (0.8, 1.25)
MIN_BOX_SIDE = 1.0  # pixels; boxes cropped thinner than this are dropped


@dataclass(frozen=True)
class Augment:
    flip: bool
    scale: float
    offset: tuple[float, float]  # where to crop, as fractions of the room (y, x)


@dataclass(frozen=True)
class HostExample:
    """One example's CPU part (what a loader worker prepares): uint8 CHW pixels and boxes, flipped."""

    pixels: Any
    boxes: np.ndarray  # x1 y1 x2 y2 in pixels
    labels: np.ndarray
    augment: Augment

    def pin_memory(self) -> HostExample:  # DataLoader's pin_memory calls this on each example
        return replace(self, pixels=self.pixels.pin_memory())


class TrainBatches:
    """This rank's share of each global batch: with N ranks of batch B, step s takes the examples
    s*N*B .. (s+1)*N*B of the (seed, epoch) order and rank r the r-th B of them, so N ranks together
    see the same examples per step as one process with batch N*B."""

    def __init__(
        self,
        dataset: Path,
        batch_size: int,
        seed: int,
        device: Any,
        first_step: int = 0,
        rank: int = 0,
        world_size: int = 1,
        preload: bool = False,
    ) -> None:
        """`preload`: keep the decoded images on `device` (a GPU; not with loader workers, which
        prepare host batches)."""
        files = split_files(dataset, TRAIN_PATTERN)
        if not files:
            raise FileNotFoundError(f"{dataset}: no training split ({TRAIN_PATTERN})")
        self.items: list[LabeledImage] = list(read_records(files))
        if not self.items:
            raise ValueError(f"{dataset}: the training split has no images")
        self.batch_size, self.seed, self.device = batch_size, seed, device
        self.stride = batch_size * world_size  # examples all ranks consume per step
        self.position = first_step * self.stride + rank * batch_size  # this rank's next example
        self._cache: dict[int, Any] = {}
        self._cached_bytes = 0
        self.preload = preload
        self.cache_limit_bytes = DEVICE_CACHE_LIMIT_BYTES if preload else CACHE_LIMIT_BYTES

    def next(self) -> tuple[list[Any], list[dict[str, Any]]]:
        batch = self.host_batch(self.position)
        self.position += self.stride
        return self.to_device(batch)

    def host_batch(self, position: int) -> list[HostExample]:
        """The CPU part of the batch that starts at `position`: decoded, flipped, boxes in pixels."""
        return [self.host_example(position + offset) for offset in range(self.batch_size)]

    def host_example(self, position: int) -> HostExample:
        index, augment = self._pick(position)
        item = self.items[index]
        pixels = self._pixels(index)
        boxes = np.asarray(item.boxes, dtype=np.float32).reshape(-1, 4)[:, [1, 0, 3, 2]]  # -> x1 y1 x2 y2
        labels = np.asarray(item.labels, dtype=np.int64)
        if augment.flip:
            import torch

            pixels = torch.flip(pixels, dims=[2])
            boxes = boxes.copy()
            boxes[:, [0, 2]] = item.width - boxes[:, [2, 0]]
        return HostExample(pixels, boxes, labels, augment)

    def to_device(self, batch: list[HostExample]) -> tuple[list[Any], list[dict[str, Any]]]:
        """The device part: to the device as float in [0, 1], scaled and cropped there; the batch's boxes
        and labels go over in one copy."""
        import torch

        images, kept = [], []
        for host in batch:
            image = host.pixels.to(self.device, non_blocking=True).float().div_(255.0)
            image, boxes, labels = _scale_and_crop(image, host.boxes, host.labels, host.augment)
            images.append(image)
            kept.append(np.concatenate([boxes, labels[:, None].astype(np.float32)], axis=1))
        table = torch.from_numpy(np.concatenate(kept)).to(self.device, non_blocking=True)
        targets = [
            {"boxes": rows[:, :4], "labels": rows[:, 4].long()}
            for rows in torch.split(table, [len(rows) for rows in kept])
        ]
        return images, targets

    def _pick(self, position: int) -> tuple[int, Augment]:
        count = len(self.items)
        epoch, offset = divmod(position, count)
        rng = np.random.default_rng([self.seed, epoch])
        order = rng.permutation(count)
        flips = rng.random(count) < 0.5
        scales = rng.uniform(*SCALE_RANGE, size=count)
        offsets = rng.random((count, 2))
        augment = Augment(
            bool(flips[offset]), float(scales[offset]), (float(offsets[offset, 0]), float(offsets[offset, 1]))
        )
        return int(order[offset]), augment

    def _pixels(self, index: int):
        """uint8 CHW tensor of one image, decoded once while the cache has room."""
        import torch

        cached = self._cache.get(index)
        if cached is not None:
            return cached
        pixels = torch.from_numpy(np.ascontiguousarray(self.items[index].decoded().transpose(2, 0, 1)))
        if self._cached_bytes + pixels.numel() <= self.cache_limit_bytes:
            pixels = pixels.to(self.device) if self.preload else pixels
            self._cache[index] = pixels
            self._cached_bytes += pixels.numel()
        return pixels


def _scale_and_crop(image, boxes: np.ndarray, labels: np.ndarray, augment: Augment):
    """Scale by augment.scale, then crop (or pad bottom/right) back to the original height and width."""
    import torch

    height, width = image.shape[-2:]
    new_h, new_w = max(1, round(height * augment.scale)), max(1, round(width * augment.scale))
    scaled = torch.nn.functional.interpolate(
        image[None], size=(new_h, new_w), mode="bilinear", align_corners=False
    )[0]
    top = int(augment.offset[0] * max(0, new_h - height))
    left = int(augment.offset[1] * max(0, new_w - width))
    cropped = scaled[:, top : top + height, left : left + width]
    out = torch.zeros_like(image)
    out[:, : cropped.shape[1], : cropped.shape[2]] = cropped
    sy, sx = new_h / height, new_w / width
    moved = boxes * np.array([sx, sy, sx, sy], dtype=np.float32) - np.array(
        [left, top, left, top], dtype=np.float32
    )
    limit = np.array([min(width, cropped.shape[2]), min(height, cropped.shape[1])] * 2, dtype=np.float32)
    moved = np.clip(moved, 0, limit)
    keep = (moved[:, 2] - moved[:, 0] >= MIN_BOX_SIDE) & (moved[:, 3] - moved[:, 1] >= MIN_BOX_SIDE)
    return out, moved[keep].reshape(-1, 4), labels[keep]
