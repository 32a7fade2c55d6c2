"""`--loader-workers N`: TrainBatches' batches prepared by N worker processes, in the very same order.

A batch is a function of (seed, position) alone, so worker k prepares the steps k, k+N, k+2N, ... after
the first position, and torch's DataLoader, which takes an IterableDataset's workers round-robin and
hands their batches back in that order, returns steps 0, 1, 2, ... A resumed run starts the workers at
its checkpoint's position. The workers do the CPU part (decode, flip, uint8 pixels, boxes); the training
process does the device part (copy, float, scale and crop, on the device), as without workers.
`--pin-memory` puts the workers' pixels in pinned host memory, so the copy to a GPU can be asynchronous.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from training.torch_data import CACHE_LIMIT_BYTES, HostExample, TrainBatches

PREFETCH_BATCHES_PER_WORKER = 2


class HostBatches(IterableDataset):
    """Worker k of N yields the host batches of the steps k, k+N, ... after `first_position`."""

    def __init__(self, batches: TrainBatches, first_position: int) -> None:
        self.batches, self.first_position = batches, first_position

    def __iter__(self) -> Iterator[list[HostExample]]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        batches = self.batches
        batches.cache_limit_bytes = CACHE_LIMIT_BYTES // workers  # each worker keeps a cache of its own
        step = worker
        while True:
            batch = batches.host_batch(self.first_position + step * batches.stride)
            # a fresh tensor per batch: one from the cache would be moved to shared memory for good
            yield [replace(example, pixels=example.pixels.clone()) for example in batch]
            step += workers


class LoaderBatches:
    """TrainBatches.next() with the CPU part in `workers` processes, started at the first next()."""

    def __init__(self, batches: TrainBatches, workers: int, pin_memory: bool = False) -> None:
        self.batches, self.workers, self.pin_memory = batches, workers, pin_memory
        self._iterator: Iterator[list[HostExample]] | None = None

    @property
    def position(self) -> int:
        return self.batches.position

    def next(self) -> tuple[list[Any], list[dict[str, Any]]]:
        if self._iterator is None:
            loader = DataLoader(
                HostBatches(self.batches, self.batches.position),
                batch_size=None,
                num_workers=self.workers,
                pin_memory=self.pin_memory,
                prefetch_factor=PREFETCH_BATCHES_PER_WORKER,
                # its own generator: seeding the workers must not draw from the model's random numbers
                generator=torch.Generator().manual_seed(0),
            )
            self._iterator = iter(loader)
        host = next(self._iterator)
        self.batches.position += self.batches.stride
        return self.batches.to_device(host)

    def close(self) -> None:
        """Stop the workers (they would otherwise run until the process ends)."""
        iterator, self._iterator = self._iterator, None
        shutdown = getattr(iterator, "_shutdown_workers", None)
        if shutdown is not None:
            with contextlib.suppress(Exception):
                shutdown()
