"""The argument parsers of `python -m training dataset|convert-coco|train` and the argument types."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path

from runformat import RUN_DIR_ENV
from runformat.cli import duration_type
from runformat.multinode import add_node_options

FRAMEWORKS = ("tf", "torch")
DEFAULT_DATA_DIR = "data"
ALL_GPUS = "all"
Handler = Callable[[argparse.Namespace, float], int]


def add_dataset(commands, handler: Handler) -> None:
    from training.synth import DIFFICULTIES

    command = commands.add_parser("dataset", help="generate the synthetic find-the-target dataset")
    command.add_argument("--out", type=Path, help="default: <data-dir>/datasets/waldo")
    command.add_argument("--data-dir", type=Path, default=Path(DEFAULT_DATA_DIR))
    command.add_argument("--size", type=image_size, default=256, help="image side in pixels")
    command.add_argument("--train", type=positive_int, default=256, help="training images")
    command.add_argument("--val", type=positive_int, default=32, help="held-out images")
    command.add_argument("--seed", type=non_negative_int, default=0)
    command.add_argument("--difficulty", choices=sorted(DIFFICULTIES), default="hard")
    existing = command.add_mutually_exclusive_group()
    existing.add_argument("--force", action="store_true", help="replace an existing dataset at --out")
    existing.add_argument(
        "--if-missing", action="store_true",
        help="generate only where no current dataset is (none, or one drawn by an older generator)",
    )  # fmt: skip
    command.set_defaults(handler=handler)


def add_convert_coco(commands, handler: Handler) -> None:
    command = commands.add_parser("convert-coco", help="convert COCO annotations of one category")
    command.add_argument("--images", type=Path, required=True, help="folder the file_name entries are in")
    command.add_argument("--annotations", type=Path, required=True, help="COCO instances JSON")
    command.add_argument("--out", type=Path, required=True)
    command.add_argument("--category", help="category name to detect (needed if there are several)")
    command.add_argument("--val-fraction", type=fraction, default=0.1)
    command.add_argument("--seed", type=non_negative_int, default=0)
    command.add_argument("--force", action="store_true", help="replace an existing dataset at --out")
    command.set_defaults(handler=handler)


def add_train(commands, handler: Handler) -> None:
    from training.experiment import PRECISIONS, PRESETS

    command = commands.add_parser("train", help="train Faster R-CNN for a wall-clock budget")
    add_run_dir(command)
    command.add_argument(
        "--framework",
        choices=FRAMEWORKS,
        default="tf",
        help="tf: TensorFlow Model Garden (default); torch: torchvision, without TensorFlow",
    )
    command.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    command.add_argument(
        "--duration", type=duration_type(), default=600.0, help="budget, e.g. 75m (default 10m)"
    )
    command.add_argument("--preset", choices=sorted(PRESETS), default="small")
    command.add_argument(
        "--batch", type=positive_int, default=2, help="batch per device (global: N times this with N devices)"
    )
    command.add_argument(
        "--procs",
        type=device_count,
        help="torch: N data-parallel processes on the CPU (DDP over gloo, launched by torchrun)",
    )
    command.add_argument(
        "--gpus",
        type=device_count,
        help="N GPUs or `all`: torch DDP over NCCL (torchrun), tf Model Garden's mirrored strategy",
    )
    add_node_options(command)
    command.add_argument(
        "--precision",
        choices=PRECISIONS,
        help="default float32 on every device; float16 or bfloat16: mixed precision (tf) or autocast (torch)",
    )
    add_setting_options(command)
    command.add_argument("--init-checkpoint", help="backbone checkpoint to start from (a local path)")
    command.add_argument("--data-dir", type=Path, default=Path(DEFAULT_DATA_DIR))
    command.add_argument(
        "--dataset", type=Path, help="default: <data-dir>/datasets/waldo (generated if missing)"
    )
    command.add_argument("--max-steps", type=positive_int, help="stop after N steps of this run")
    command.add_argument("--checkpoint-every", type=duration_type(), default=60.0)
    command.add_argument(
        "--keep-checkpoints", type=positive_int, default=3, help="checkpoints kept on disk (default 3)"
    )
    command.add_argument(
        "--no-checkpoint",
        action="store_true",
        help="write no checkpoint at all (a tuning trial; needs --no-export)",
    )
    command.add_argument("--seed", type=non_negative_int, default=0)
    command.add_argument("--no-export", action="store_true", help="skip export, evaluate, detect and infer")
    from training.inference.command import add_train_options

    add_train_options(command)
    command.add_argument("--score-threshold", type=fraction, default=0.5)
    command.set_defaults(handler=handler)


def add_setting_options(command) -> None:
    """What a tuning trial turns besides --batch and --precision (runformat.tuning.Setting)."""
    command.add_argument(
        "--tf32",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="GPU: float32 matmuls and convolutions on TF32 tensor cores, or (--no-tf32) neither; default: "
        "the framework's (PyTorch: convolutions only; TensorFlow: both)",
    )
    command.add_argument(
        "--channels-last", action="store_true", help="torch: the model and the images in NHWC memory format"
    )
    command.add_argument(
        "--compile",
        action="store_true",
        help="torch: torch.compile of the backbone; tf: XLA of the train step",
    )
    command.add_argument(
        "--threads", type=positive_int, help="CPU intra-op threads (default: the framework's own choice)"
    )
    command.add_argument(
        "--loader-workers",
        type=non_negative_int,
        default=0,
        help="torch: N processes prepare the batches, in the same order (default 0: in the training loop)",
    )
    command.add_argument(
        "--pin-memory", action="store_true", help="torch, GPU: the loader workers' batches in pinned memory"
    )


def add_run_dir(command) -> None:
    command.add_argument("--run-dir", type=Path, help=f"run directory (default: ${RUN_DIR_ENV})")


def run_dir_or_none(args: argparse.Namespace) -> Path | None:
    return args.run_dir or (Path(os.environ[RUN_DIR_ENV]) if os.environ.get(RUN_DIR_ENV) else None)


def device_count(text: str) -> int | str:
    """A number of devices >= 1, or `all` (every visible GPU)."""
    if text == ALL_GPUS:
        return ALL_GPUS
    if "," in text:
        raise argparse.ArgumentTypeError(
            f"{text!r} is a sweep: one count per training here (sweeps: python -m collect timed)"
        )
    return positive_int(text)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return int(text)


def image_size(text: str) -> int:
    value = positive_int(text)
    if not 64 <= value <= 2048:
        raise argparse.ArgumentTypeError(f"image size must be 64..2048 pixels, got {value}")
    return value


def fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}")
    return value
