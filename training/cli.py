"""`python -m training dataset|convert-coco|train|export|evaluate|detect|infer|flops|devices`."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from runformat import RUN_DIR_ENV
from runformat.records import training_framework
from training.cli_args import (
    FRAMEWORKS,
    add_convert_coco,
    add_dataset,
    add_run_dir,
    add_train,
    fraction,
    positive_int,
    run_dir_or_none,
)
from training.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, DiskFullStop, RunDirError, UsageError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line instead of argparse's usage block
        raise UsageError(f"{message} (see {self.prog} --help)")


def main(argv: list[str] | None = None) -> int:
    process_start = time.time()
    from training.device import quiet_tensorflow_environment

    quiet_tensorflow_environment()
    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        args = _parser().parse_args(argv)
        args.argv = argv
        return args.handler(args, process_start)
    except UsageError as exc:
        return _fail(str(exc), EXIT_USAGE)
    except KeyboardInterrupt:
        return _fail("interrupted", 128 + signal.SIGINT)
    except DiskFullStop as exc:
        if not sys.stderr.isatty():  # the traceback is for a log (the collector's command.log), not a person
            traceback.print_exception(exc)
        return _fail(str(exc), EXIT_FAILED)
    except Exception as exc:
        from training.coco import CocoError
        from training.device import DeviceError
        from training.inference.command import NoRuntime

        if isinstance(exc, (DeviceError, NoRuntime)):
            return _fail(str(exc), EXIT_FAILED)
        if isinstance(exc, (RunDirError, CocoError)):
            return _fail(str(exc), EXIT_FAILED if isinstance(exc, DeviceError) else EXIT_USAGE)
        traceback.print_exc()
        return _fail(" ".join(str(exc).split()) or type(exc).__name__, EXIT_FAILED)


def run() -> None:
    """Entry point: exit without waiting for TensorFlow's slow interpreter teardown (20-33 s measured)."""
    from training.console import filter_native_stderr, tolerate_closed_output

    stderr_filter = filter_native_stderr()
    tolerate_closed_output()
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    if stderr_filter is not None:
        stderr_filter.close()
    os._exit(code)


def _fail(message: str, code: int) -> int:
    print(f"training: error: {message}", file=sys.stderr, flush=True)
    return code


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m training", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    add_dataset(commands, _cmd_dataset)
    add_convert_coco(commands, _cmd_convert_coco)
    add_train(commands, _cmd_train)
    for name, handler, text in (
        ("export", _cmd_export, "export the latest checkpoint of a run as a SavedModel into DIR/model"),
        (
            "evaluate",
            _cmd_evaluate,
            "mAP@0.5 and recall of DIR/model on the held-out split into DIR/eval.json",
        ),
        ("detect", _cmd_detect, "held-out images with predicted boxes drawn into DIR/detections/"),
    ):
        command = commands.add_parser(name, help=text, description=text)
        add_run_dir(command)
        command.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
        if name != "export":
            command.add_argument(
                "--dataset",
                type=Path,
                help="dataset with the held-out split (default: the one in DIR/training.json)",
            )
            command.add_argument("--score-threshold", type=fraction, default=0.5)
        if name == "detect":
            command.add_argument("--limit", type=positive_int, help="draw only the first N held-out images")
        command.set_defaults(handler=handler)
    from training.inference.command import add_parser as add_infer

    add_infer(commands)
    flops = commands.add_parser(
        "flops",
        help="count a recorded torch run's FLOPs per training example into its training.json",
        description="rebuild a recorded torch run's model, count one training step's FLOPs on this CPU "
        "with synthetic inputs of the recorded shape, and write `flops` into RUN_DIR/training.json",
    )
    flops.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    flops.add_argument("--dry-run", action="store_true", help="print the count, write nothing")
    flops.set_defaults(handler=_cmd_flops)
    devices = commands.add_parser("devices", help="list the devices TensorFlow (or torch) sees")
    devices.add_argument("--require", choices=["gpu"], help="exit 1 unless the framework sees a GPU")
    devices.add_argument("--framework", choices=FRAMEWORKS, default="tf")
    devices.set_defaults(handler=_cmd_devices)
    return parser


def _run_dir(args: argparse.Namespace) -> Path:
    run_dir = run_dir_or_none(args)
    if run_dir is None:
        raise UsageError(f"--run-dir is required (or set {RUN_DIR_ENV})")
    if run_dir.exists() and not run_dir.is_dir():
        raise UsageError(f"--run-dir {run_dir}: not a directory")
    return run_dir


def _existing_run_dir(args: argparse.Namespace) -> Path:
    run_dir = _run_dir(args)
    if not run_dir.is_dir():
        raise UsageError(f"--run-dir {run_dir}: no such directory")
    return run_dir


def _cmd_dataset(args: argparse.Namespace, _start: float) -> int:
    from training.dataset import generate_dataset, why_draw

    out = args.out or args.data_dir / "datasets" / "waldo"
    if args.if_missing and why_draw(out) is None:
        print(f"dataset: {out} is there")
        return EXIT_OK
    if not args.if_missing:
        _refuse_overwrite(out, args.force)
    info = generate_dataset(
        out, size=args.size, train=args.train, val=args.val, seed=args.seed, difficulty=args.difficulty
    )
    print(
        f"dataset: {info['splits']['train']['images']} train + {info['splits']['val']['images']} held-out "
        f"{args.size}px images ({args.difficulty}) in {out} ({info['generation_s']} s)"
    )
    return EXIT_OK


def _cmd_convert_coco(args: argparse.Namespace, _start: float) -> int:
    from training.coco import convert_coco

    if not args.images.is_dir():
        raise UsageError(f"--images {args.images}: no such directory")
    if not args.annotations.is_file():
        raise UsageError(f"--annotations {args.annotations}: no such file")
    _refuse_overwrite(args.out, args.force)
    info = convert_coco(
        args.images,
        args.annotations,
        args.out,
        category=args.category,
        val_fraction=args.val_fraction,
        seed=args.seed,
    )
    splits = info["splits"]
    print(
        f"convert-coco: {splits['train']['images']} train + {splits['val']['images']} held-out images "
        f"of {info['category']!r} in {args.out}"
    )
    return EXIT_OK


def _refuse_overwrite(out: Path, force: bool) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise UsageError(f"{out} already exists; pass --force to replace it")


def _cmd_train(args: argparse.Namespace, process_start: float) -> int:
    from training.train_command import run_train, usage_problem

    run_dir = _run_dir(args)
    problem = usage_problem(args)
    if problem:
        raise UsageError(problem)
    return run_train(args, process_start, run_dir)


def _run_framework(run_dir: Path) -> str:
    """`torch` for a run trained with --framework torch, else `tf` (what training.json says)."""
    from runformat import TRAINING_JSON, read_json

    try:
        return "torch" if read_json(run_dir / TRAINING_JSON).get("framework") == "torch" else "tf"
    except ValueError:
        return "tf"


def _standalone(args: argparse.Namespace, name: str, action: Callable[[Path], dict]) -> int:
    from training.runlog import Phase
    from training.train_command import prepare, report

    run_dir = _existing_run_dir(args)
    prepare(args.device, _run_framework(run_dir))
    with Phase(run_dir, name):
        result = action(run_dir)
    report(name, result)
    return EXIT_OK


def _cmd_export(args: argparse.Namespace, _start: float) -> int:
    from training.postrun import export_model

    return _standalone(args, "export", export_model)


def _cmd_evaluate(args: argparse.Namespace, _start: float) -> int:
    from training.postrun import evaluate_model

    return _standalone(
        args,
        "evaluate",
        lambda run_dir: evaluate_model(run_dir, args.dataset, args.score_threshold, device=args.device),
    )


def _cmd_detect(args: argparse.Namespace, _start: float) -> int:
    from training.postrun import draw_detections

    return _standalone(
        args,
        "detect",
        lambda run_dir: draw_detections(run_dir, args.dataset, args.score_threshold, args.limit, args.device),
    )


def _cmd_flops(args: argparse.Namespace, _start: float) -> int:
    import json
    import socket

    from runformat import TRAINING_JSON, read_json, write_json_atomic

    path = args.run_dir / TRAINING_JSON
    if not args.run_dir.is_dir():
        raise UsageError(f"{args.run_dir}: no such run directory")
    if not path.is_file():
        raise UsageError(f"{args.run_dir}: no {TRAINING_JSON} (not a training's run directory)")
    try:
        training = read_json(path)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    framework = training_framework(training)
    if framework == "tensorflow":
        raise UsageError(f"{path}: a TensorFlow run; counting after the run is for torch runs only")
    if framework != "torch":
        raise UsageError(f"{path}: unknown framework {framework!r}")
    from training.flops import count_recorded_torch_run, recorded_torch_shape

    try:
        recorded_torch_shape(training)
    except ValueError as exc:
        raise UsageError(f"{path}: {exc}") from exc
    flops = count_recorded_torch_run(training, socket.gethostname())
    print(json.dumps(flops, indent=2))
    if not args.dry_run:
        write_json_atomic(path, {**training, "flops": flops})
        print(f"flops: written into {path}")
    return EXIT_OK


def _cmd_devices(args: argparse.Namespace, _start: float) -> int:
    from training.device import prepare_device

    if args.framework == "torch":
        return _torch_devices(args.require)

    info = prepare_device(args.require or "any")
    import tensorflow as tf

    print(f"tensorflow {tf.__version__} ({'CUDA' if tf.test.is_built_with_cuda() else 'no CUDA'} build)")
    for name in info.tensorflow_devices:
        print(f"  {name}")
    for index, gpu in enumerate(info.gpu_names):
        print(f"  GPU {index}: {gpu}")
    if not info.gpu_names:
        print("  no GPU visible to TensorFlow")
    return EXIT_OK


def _torch_devices(require: str | None) -> int:
    from training.device import prepare_torch_device

    info = prepare_torch_device(require or "any")
    import torch

    print(
        f"torch {torch.__version__} "
        f"({'CUDA ' + torch.version.cuda if torch.version.cuda else 'no CUDA'} build)"
    )
    print("  cpu")
    for index, gpu in enumerate(info.gpu_names):
        print(f"  cuda:{index}: {gpu}")
    if not info.gpu_names:
        print("  no GPU visible to torch")
    return EXIT_OK
