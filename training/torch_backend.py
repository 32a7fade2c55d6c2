"""The PyTorch backend of the timed loop: torchvision Faster R-CNN, our SGD step, our checkpoints.

Same contract as the TensorFlow backend (training.trainer.TrainingSession): restore_or_initialize,
global_step, save, step and resolve. step() returns the step's losses as a tensor still on the device;
resolve() turns many steps' worth into numbers with one device-to-host copy, so the shared loop decides
how often the host waits for the device (every step on a CPU, where it costs nothing; every few steps
on a GPU).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from runformat import CHECKPOINTS_DIR
from runformat.diskfull import DiskFullError, disk_full_in
from training.distributed import World
from training.torch_model import TORCH_PRESETS, build_model, model_config
from training.torch_settings import compile_backbone, compile_failure, to_channels_last

MAX_CHECKPOINTS = 3
CHECKPOINT_NAME = re.compile(r"^ckpt-(\d+)\.pt$")
# training.csv columns (runlog.LOSS_COLUMNS keys) from torchvision's loss names; model_loss and
# total_loss are their sum (weight decay is applied by the optimizer, not added to a loss).
TORCH_LOSSES = {
    "rpn_score_loss": "loss_objectness",
    "rpn_box_loss": "loss_rpn_box_reg",
    "frcnn_cls_loss": "loss_classifier",
    "frcnn_box_loss": "loss_box_reg",
}
VALUE_ORDER = (
    "total_loss",
    "rpn_score_loss",
    "rpn_box_loss",
    "frcnn_cls_loss",
    "frcnn_box_loss",
    "model_loss",
)
AUTOCAST_DTYPES = {"float16": "float16", "bfloat16": "bfloat16"}


def torch_fields(device_kind: str, ranks_on_node: int = 1) -> dict[str, Any]:
    """What training.json records about the framework and the device(s) torch used on this node (one
    GPU per rank: cuda:LOCAL_RANK)."""
    import torch
    import torchvision

    devices = ",".join(f"cuda:{rank}" for rank in range(ranks_on_node))
    return {
        "framework": "torch",
        "framework_version": torch.__version__,
        "torchvision_version": torchvision.__version__,
        "torch_device": devices if device_kind == "gpu" else "cpu",
        "torch_threads": torch.get_num_threads(),
    }


class TorchSession:
    """One rank's model and optimizer; with a distributed `world`, DistributedDataParallel over it."""

    def __init__(self, options, device_kind: str, world: World | None = None) -> None:
        import torch

        self.torch = torch
        self.world = world or World()
        self.device = torch.device(f"cuda:{self.world.local_rank}" if device_kind == "gpu" else "cpu")
        preset = TORCH_PRESETS[options.preset]
        global_batch = options.batch_size * self.world.size
        self.learning_rate = preset.base_learning_rate_per_example * global_batch
        self.warmup_steps = preset.warmup_steps
        self.config = {
            **model_config(options.preset),
            "batch_size": global_batch,
            "per_device_batch_size": options.batch_size,
            "world_size": self.world.size,
            "precision": options.precision,
            "learning_rate": self.learning_rate,
            "warmup_learning_rate": self.learning_rate / 20,
            "seed": options.seed,
        }
        self.options = options
        torch.manual_seed(options.seed)
        self.bare_model = build_model(self.config).to(self.device).train()
        if options.channels_last:
            to_channels_last(self.bare_model)
        self.model = self.bare_model
        if self.world.distributed:
            from torch.nn.parallel import DistributedDataParallel

            ids = [self.world.local_rank] if device_kind == "gpu" else None
            self.model = DistributedDataParallel(self.bare_model, device_ids=ids)
        self.optimizer = torch.optim.SGD(
            self.model.parameters(),
            lr=self.learning_rate,
            momentum=self.config["momentum"],
            weight_decay=self.config["weight_decay"],
        )
        self.autocast_dtype = (
            getattr(torch, AUTOCAST_DTYPES[options.precision], None)
            if (options.precision in AUTOCAST_DTYPES)
            else None
        )
        self.scaler = (
            _grad_scaler(torch) if self.autocast_dtype is torch.float16 and device_kind == "gpu" else None
        )
        self.step_count = 0
        self.checkpoint_dir: Path | None = None
        self.restored_from: str | None = None
        self.batches = None
        self.loader: Any = None  # training.torch_loader.LoaderBatches with --loader-workers
        self.compile_pending = bool(options.compile)  # compiled at the first step, after the FLOP count

    def restore_or_initialize(self, checkpoint_dir: Path) -> int:
        from training.torch_data import TrainBatches

        self.checkpoint_dir = Path(checkpoint_dir)
        latest = latest_checkpoint(self.checkpoint_dir)
        if latest is not None:
            state = _load(self.torch, latest, self.device)
            self.bare_model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
            if self.scaler is not None and state.get("scaler"):
                self.scaler.load_state_dict(state["scaler"])
            self.step_count = int(state["step"])
            self.restored_from = f"{CHECKPOINTS_DIR}/{latest.name}"
        self.batches = TrainBatches(
            self.options.dataset,
            self.options.batch_size,
            self.options.seed,
            self.device,
            self.step_count,
            rank=self.world.rank,
            world_size=self.world.size,
            preload=self.device.type == "cuda" and not self.options.loader_workers,
        )
        if self.options.loader_workers:
            from training.torch_loader import LoaderBatches

            self.loader = LoaderBatches(self.batches, self.options.loader_workers, self.options.pin_memory)
        return self.step_count

    def global_step(self) -> int:
        return self.step_count

    flops_at_start = True  # counted before the first step: the training's own first batch, one step

    def count_flops(self) -> dict[str, Any]:
        """training.json's `flops`: one step on a copy of the model, on the batch the first step will take
        (the training itself gets the same batch, weights and random numbers as without the count)."""
        from training.flops import count_torch_training, guarded

        def count() -> dict[str, Any]:
            assert self.batches is not None, "restore_or_initialize() first"
            position = self.batches.position
            try:
                images, targets = self.batches.next()
            finally:
                self.batches.position = position
            return count_torch_training(self.bare_model, images, targets, self.autocast_dtype, self.device)

        return guarded("torch", count)

    def close(self) -> None:
        """Done training: the loader's workers stop (the TensorFlow session parks its input iterator)."""
        if self.loader is not None:
            self.loader.close()

    def save(self) -> str | None:
        """Checkpoint at the current step; the run-relative path, or None if this step is already saved."""
        assert self.checkpoint_dir is not None
        if not self.world.is_main:
            return None
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        path = self.checkpoint_dir / f"ckpt-{self.step_count}.pt"
        if path.exists():
            return None
        state = {
            "step": self.step_count,
            "model": self.bare_model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict() if self.scaler is not None else {},
        }
        partial = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        try:
            with open(partial, "wb") as handle:  # a Python file: torch's error then keeps the OSError
                self.torch.save(state, handle)
            os.replace(partial, path)
        except BaseException as exc:
            full = disk_full_in(exc, path)  # the free space before the half-written file goes
            partial.unlink(missing_ok=True)
            if full is not None:
                raise DiskFullError(path, full.free_bytes) from exc
            raise
        keep = getattr(self.options, "keep_checkpoints", MAX_CHECKPOINTS)
        for old in sorted(_checkpoints(self.checkpoint_dir))[:-keep]:
            old[1].unlink(missing_ok=True)
        return f"{CHECKPOINTS_DIR}/{path.name}"

    def step(self) -> tuple[Any, float]:
        if self.compile_pending:
            compile_backbone(self.bare_model)
            self.compile_pending = False
        if not self.options.compile:
            return self._step()
        try:
            return self._step()
        except Exception as exc:
            failure = compile_failure(exc)
            if failure is None:
                raise
            raise failure from exc

    def _step(self) -> tuple[Any, float]:
        torch = self.torch
        assert self.batches is not None, "restore_or_initialize() first"
        images, targets = (self.loader or self.batches).next()
        rate = self._learning_rate(self.step_count)
        for group in self.optimizer.param_groups:
            group["lr"] = rate
        with torch.autocast(
            self.device.type, dtype=self.autocast_dtype, enabled=self.autocast_dtype is not None
        ):
            losses = self.model(images, targets)
        total = sum(losses.values())
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler is not None:
            self.scaler.scale(total).backward()
            self.scaler.unscale_(self.optimizer)
        else:
            total.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config["clip_grad_norm"])
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.step_count += 1
        parts = [losses[TORCH_LOSSES[name]] for name in VALUE_ORDER[1:5]]
        values = torch.stack([total, *parts, total]).detach().float()
        return values, rate

    def resolve(self, pending: list[tuple[Any, float]]) -> list[dict[str, float]]:
        """Numbers for several steps' losses: one device-to-host copy (and wait) for all of them."""
        table = self.torch.stack([values for values, _ in pending]).cpu().tolist()
        return [
            {**dict(zip(VALUE_ORDER, row, strict=True)), "learning_rate": rate}
            for row, (_, rate) in zip(table, pending, strict=True)
        ]

    def weights_digest(self) -> str:
        from training.distributed import weights_digest

        return weights_digest(self.bare_model)

    def _learning_rate(self, step: int) -> float:
        if step >= self.warmup_steps:
            return self.learning_rate
        start = self.learning_rate / 20
        return start + (self.learning_rate - start) * step / self.warmup_steps


def _grad_scaler(torch):
    amp = getattr(torch, "amp", None)
    if amp is not None and hasattr(amp, "GradScaler"):
        try:
            return amp.GradScaler("cuda")
        except TypeError:
            pass
    return torch.cuda.amp.GradScaler()


def _checkpoints(directory: Path) -> list[tuple[int, Path]]:
    if not directory.is_dir():
        return []
    found = []
    for path in directory.iterdir():
        match = CHECKPOINT_NAME.match(path.name)
        if match:
            found.append((int(match.group(1)), path))
    return found


def latest_checkpoint(directory: Path) -> Path | None:
    found = sorted(_checkpoints(Path(directory)))
    return found[-1][1] if found else None


def checkpoint_step(path: Path) -> int | None:
    match = CHECKPOINT_NAME.match(Path(path).name)
    return int(match.group(1)) if match else None


def _load(torch, path: Path, device) -> dict[str, Any]:
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except TypeError:  # torch older than 1.13 has no weights_only
        return torch.load(path, map_location=device)
