"""What training.json records about a training: the initial state and the figures updated as it goes."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

from training.dataset import dataset_info
from training.device import DeviceInfo
from training.distributed import World
from training.experiment import PRESETS
from training.failures import failure_line
from training.settings import settings_record, tf_intra_op_threads

BUDGET_NOTE = (
    "the budget and elapsed_s count from the first call of the training step, graph tracing "
    "included; importing the framework and building the model and input pipeline (setup_s) come before"
)


def update_figures(state: dict[str, Any], clock, session, options) -> None:
    steady = clock.steady_steps_per_s()
    state.update(
        steps=len(clock.ends),
        global_step=session.global_step(),
        first_step_s=_rounded(clock.first_step_s()),
        warmup_steps_excluded=clock.warmup_excluded() if clock.ends else 0,
        steady_steps_per_s=_rounded(steady),
        steady_examples_per_s=_rounded(steady * options.global_batch_size if steady else None),
    )


def _framework_fields(options, device: DeviceInfo, world: World) -> dict[str, Any]:
    if options.framework == "torch":
        from training.torch_backend import torch_fields

        return torch_fields(device.kind, world.ranks_on_node if world.distributed else options.replicas)
    import tensorflow as tf

    return {
        "framework": "tensorflow",
        "framework_version": tf.__version__,
        "tensorflow_devices": device.tensorflow_devices,
        "tensorflow_version": tf.__version__,
        "tf_intra_op_threads": tf_intra_op_threads(tf),
    }


def initial_state(options, device: DeviceInfo, world: World) -> dict[str, Any]:
    preset = PRESETS[options.preset]
    return {
        "status": "running",
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "device_requested": options.device,
        "device_used": device.used,
        "gpu_names": device.gpu_names,
        "gpu_uuids": device.gpu_uuids,
        **_framework_fields(options, device, world),
        "preset": options.preset,
        "backbone": f"resnet{preset.backbone_depth}",
        "image_size": preset.image_size,
        "loss_read_every_steps": options.loss_read_interval(),
        "batch_size": options.global_batch_size,
        "per_device_batch_size": options.batch_size,
        "world_size": options.replicas,
        "distribution": _distribution(options, device, world),
        "precision": options.precision,
        "settings": settings_record(options),
        "dataset": str(options.dataset),
        "dataset_info": _dataset_summary(options.dataset),
        "seed": options.seed,
        "duration_budget_s": options.duration_s,
        "max_steps": options.max_steps,
        "budget_note": BUDGET_NOTE,
        "start_unix": None,
        "end_unix": None,
        "setup_s": None,
        "first_step_s": None,
        "steps": 0,
        "initial_step": 0,
        "global_step": 0,
        "warmup_steps_excluded": 0,
        "steady_steps_per_s": None,
        "steady_examples_per_s": None,
        "last_checkpoint": None,
        "checkpoint_interval_s": options.checkpoint_every_s if options.checkpoint else None,
        "init_checkpoint": options.init_checkpoint,
        **(options.nodes or {}),
    }


def _dataset_summary(dataset: Path) -> dict[str, Any]:
    info = dataset_info(dataset)
    keys = ("kind", "generator_version", "seed", "image_size", "difficulty", "category", "classes")
    summary = {key: info[key] for key in keys if key in info}
    summary["images"] = {split: part.get("images") for split, part in info.get("splits", {}).items()}
    return summary


def _rounded(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _distribution(options, device: DeviceInfo, world: World) -> str | None:
    """How the replicas were run: None for one device, else e.g. `torch DDP (gloo, 2 processes)`."""
    if options.replicas <= 1:
        return None
    if options.framework == "torch":
        return f"torch DDP ({world.backend or '?'}, {world.size} processes)"
    return f"tensorflow mirrored ({options.replicas} GPUs)"


def failure_text(exc: BaseException, world: World) -> str:
    text = failure_line(exc)
    if world.distributed and not isinstance(exc, KeyboardInterrupt):
        text = (
            f"rank {world.rank} of {world.size} lost another rank mid-step (it died or was killed; "
            f"torchrun's Root Cause names it): {text[:200]}"
        )
    return text[:600]
