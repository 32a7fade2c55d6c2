"""One plain torchvision training step, as torchvision's reference script takes it: forward under
autocast (float16 with a gradient scaler on a GPU), the summed losses, backward, gradient-norm clipping,
the optimizer's step. None of the harness: the baseline the benches time (train_throughput.py,
step_profile.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def plain_step(model: Any, optimizer: Any, precision: str, device: Any, clip_norm: float) -> Callable:
    """step(images, targets) -> the total loss (a tensor, not read: reading it waits for the device)."""
    import torch

    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(precision)
    scaler = torch.amp.GradScaler("cuda") if dtype is torch.float16 and device.type == "cuda" else None

    def step(images: list[Any], targets: list[dict[str, Any]]) -> Any:
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            losses = model(images, targets)
        loss = sum(losses.values())
        optimizer.zero_grad()
        if scaler is None:
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
            optimizer.step()
            return loss
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        scaler.step(optimizer)
        scaler.update()
        return loss

    return step
