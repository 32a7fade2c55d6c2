"""The `infer` subcommand of `python -m training`: arguments, device choice, the phase row, the report."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from runformat import INFERENCE_CSV, INFERENCE_JSON, RUN_DIR_ENV
from runformat.cli import duration_type
from training.errors import EXIT_OK, UsageError
from training.inference.measure import (
    DEFAULT_BATCH_SIZES,
    DEFAULT_DURATION_S,
    PHASE_BATCH_SIZES,
    PHASE_DURATION_S,
    WARMUP_CALLS,
    InferOptions,
)
from training.inference.runtimes import RUNTIMES

MAX_BATCH = 1024
HELP = "latency, throughput and memory of DIR/model per runtime and batch size into DIR/inference.*"


def add_parser(commands) -> None:
    command = commands.add_parser("infer", help=HELP, description=HELP)
    command.add_argument("run_dir_arg", nargs="?", type=Path, metavar="RUN_DIR", help="the run directory")
    command.add_argument("--run-dir", type=Path, help=f"the same as RUN_DIR (default: ${RUN_DIR_ENV})")
    command.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    command.add_argument(
        "--runtime",
        action="append",
        type=_runtime_list,
        help=f"comma-separated, repeatable: {', '.join(RUNTIMES)} (default: all; one that cannot take "
        "the model is reported with the reason)",
    )
    command.add_argument(
        "--batch-sizes",
        type=_batch_sizes,
        default=DEFAULT_BATCH_SIZES,
        help=f"comma-separated (default {','.join(map(str, DEFAULT_BATCH_SIZES))})",
    )
    command.add_argument(
        "--duration",
        type=duration_type(),
        default=DEFAULT_DURATION_S,
        help=f"measured time per runtime × batch size, warm-up excluded (default {DEFAULT_DURATION_S:g}s)",
    )
    command.add_argument(
        "--warmup", type=_non_negative, default=WARMUP_CALLS, help="warm-up calls per batch size"
    )
    command.set_defaults(handler=run_command)


def add_train_options(command) -> None:
    """`training train`'s options for the inference phase after detection."""
    command.add_argument("--no-infer", action="store_true", help="skip the short inference benchmark")
    command.add_argument(
        "--infer-duration",
        type=duration_type(),
        help=f"inference: measured time per runtime × batch size (default {PHASE_DURATION_S:g}s, "
        f"batch sizes {','.join(map(str, PHASE_BATCH_SIZES))})",
    )


def phase_options(args: argparse.Namespace, run_dir: Path) -> InferOptions | None:
    """The short phase after training, or None with --no-infer."""
    if args.no_infer:
        return None
    return InferOptions(
        run_dir,
        device=args.device,
        batch_sizes=PHASE_BATCH_SIZES,
        duration_s=args.infer_duration or PHASE_DURATION_S,
    )


def run_command(args: argparse.Namespace, _process_start: float) -> int:
    from training.device import DeviceError, nvidia_driver_present
    from training.runlog import Phase

    run_dir = (
        args.run_dir_arg
        or args.run_dir
        or (Path(os.environ[RUN_DIR_ENV]) if os.environ.get(RUN_DIR_ENV) else None)
    )
    if run_dir is None:
        raise UsageError(f"RUN_DIR is required (or --run-dir, or set {RUN_DIR_ENV})")
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir}: no such run directory")
    if args.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = "-1"  # before TensorFlow or torch is imported
    elif not nvidia_driver_present():
        raise DeviceError("--device gpu: no NVIDIA driver on this machine; use --device cpu")
    runtimes = list(dict.fromkeys(name for group in (args.runtime or [list(RUNTIMES)]) for name in group))
    options = InferOptions(
        run_dir,
        device=args.device,
        runtimes=runtimes,
        batch_sizes=args.batch_sizes,
        duration_s=args.duration,
        warmup_calls=args.warmup,
    )
    stop = _install_stop_handler()
    with Phase(run_dir, "infer"):
        summary = infer(options, lambda: bool(stop))
    from training.inference.measure import measured_runtimes

    print(f"infer: measured {', '.join(measured_runtimes(summary))} into {INFERENCE_CSV}, {INFERENCE_JSON}")
    return 128 + stop[0] if stop else EXIT_OK


def _install_stop_handler() -> list[int]:
    """SIGINT/SIGTERM: finish the current call and keep what was measured; a second signal exits at once."""
    received: list[int] = []

    def handle(signum: int, _frame) -> None:
        if received:
            os._exit(128 + signum)
        received.append(signum)
        os.write(
            sys.stdout.fileno(), f"{signal.Signals(signum).name}: stopping after the current call\n".encode()
        )

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, handle)
    return received


def infer(options: InferOptions, should_stop: Callable[[], bool] = lambda: False) -> dict:
    """Run the benchmark; an error (one line) if no runtime could take the model at all."""
    from training.inference.measure import measured_runtimes, run_inference
    from training.inference.runtimes.base import CannotTake

    try:
        summary = run_inference(options, log=lambda line: print(line, flush=True), should_stop=should_stop)
    except CannotTake as exc:
        raise NoRuntime(f"{options.run_dir}: {exc}") from exc
    if not measured_runtimes(summary) and not should_stop():
        reasons = "; ".join(
            f"{r['runtime']}: {r.get('reason', 'no measured call')}" for r in summary["runtimes"]
        )
        raise NoRuntime(f"no runtime could take this model ({reasons})")
    return summary


class NoRuntime(RuntimeError):
    """Nothing could be measured; the message is one line for the user."""


def _runtime_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in RUNTIMES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown runtime {text!r} (choose from {', '.join(RUNTIMES)})")
    return names


def _batch_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(dict.fromkeys(int(part) for part in text.split(",")))
    except ValueError:
        sizes = ()
    if not sizes or any(not 1 <= size <= MAX_BATCH for size in sizes):
        raise argparse.ArgumentTypeError(
            f"expected batch sizes like 1,2,4,8 (each 1..{MAX_BATCH}), got {text!r}"
        )
    return sizes


def _non_negative(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return int(text)
