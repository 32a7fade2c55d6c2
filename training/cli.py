"""`python -m training dataset|convert-coco|train|export|evaluate|detect|infer|devices`."""

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
from runformat.cli import duration_type
from training.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, RunDirError, UsageError

FRAMEWORKS = ("tf", "torch")

DEFAULT_DATA_DIR = "data"

class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line instead of argparse's usage block
        raise UsageError(f"{message} (see {self.prog} --help)")


def main(argv: list[str] | None = None) -> int:
    process_start = time.time()
    from training.device import quiet_tensorflow_environment

    quiet_tensorflow_environment()
    try:
        args = _parser().parse_args(argv)
        return args.handler(args, process_start)
    except UsageError as exc:
        return _fail(str(exc), EXIT_USAGE)
    except KeyboardInterrupt:
        return _fail("interrupted", 128 + signal.SIGINT)
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
    _add_dataset(commands)
    _add_convert_coco(commands)
    _add_train(commands)
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
        _add_run_dir(command)
        command.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
        if name != "export":
            command.add_argument(
                "--dataset",
                type=Path,
                help="dataset with the held-out split (default: the one in DIR/training.json)",
            )
            command.add_argument("--score-threshold", type=_fraction, default=0.5)
        if name == "detect":
            command.add_argument("--limit", type=_positive_int, help="draw only the first N held-out images")
        command.set_defaults(handler=handler)
    from training.inference.command import add_parser as add_infer

    add_infer(commands)
    devices = commands.add_parser("devices", help="list the devices TensorFlow (or torch) sees")
    devices.add_argument("--require", choices=["gpu"], help="exit 1 unless the framework sees a GPU")
    devices.add_argument("--framework", choices=FRAMEWORKS, default="tf")
    devices.set_defaults(handler=_cmd_devices)
    return parser


def _add_dataset(commands) -> None:
    from training.synth import DIFFICULTIES

    command = commands.add_parser("dataset", help="generate the synthetic find-the-target dataset")
    command.add_argument("--out", type=Path, help="default: <data-dir>/datasets/waldo")
    command.add_argument("--data-dir", type=Path, default=Path(DEFAULT_DATA_DIR))
    command.add_argument("--size", type=_image_size, default=256, help="image side in pixels")
    command.add_argument("--train", type=_positive_int, default=256, help="training images")
    command.add_argument("--val", type=_positive_int, default=32, help="held-out images")
    command.add_argument("--seed", type=_non_negative_int, default=0)
    command.add_argument("--difficulty", choices=sorted(DIFFICULTIES), default="hard")
    command.add_argument("--force", action="store_true", help="replace an existing dataset at --out")
    command.set_defaults(handler=_cmd_dataset)


def _add_convert_coco(commands) -> None:
    command = commands.add_parser("convert-coco", help="convert COCO annotations of one category")
    command.add_argument("--images", type=Path, required=True, help="folder the file_name entries are in")
    command.add_argument("--annotations", type=Path, required=True, help="COCO instances JSON")
    command.add_argument("--out", type=Path, required=True)
    command.add_argument("--category", help="category name to detect (needed if there are several)")
    command.add_argument("--val-fraction", type=_fraction, default=0.1)
    command.add_argument("--seed", type=_non_negative_int, default=0)
    command.add_argument("--force", action="store_true", help="replace an existing dataset at --out")
    command.set_defaults(handler=_cmd_convert_coco)


def _add_train(commands) -> None:
    from training.experiment import PRECISIONS, PRESETS

    command = commands.add_parser("train", help="train Faster R-CNN for a wall-clock budget")
    _add_run_dir(command)
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
    command.add_argument("--batch", type=_positive_int, default=2)
    command.add_argument(
        "--precision",
        choices=PRECISIONS,
        help="default float32 on cpu; on gpu mixed float16 (tf), autocast bfloat16 or float16 (torch)",
    )
    command.add_argument("--init-checkpoint", help="backbone checkpoint to start from (a local path)")
    command.add_argument("--data-dir", type=Path, default=Path(DEFAULT_DATA_DIR))
    command.add_argument(
        "--dataset", type=Path, help="default: <data-dir>/datasets/waldo (generated if missing)"
    )
    command.add_argument("--max-steps", type=_positive_int, help="stop after N steps of this run")
    command.add_argument("--checkpoint-every", type=duration_type(), default=60.0)
    command.add_argument("--seed", type=_non_negative_int, default=0)
    command.add_argument("--no-export", action="store_true", help="skip export, evaluate, detect and infer")
    from training.inference.command import add_train_options

    add_train_options(command)
    command.add_argument("--score-threshold", type=_fraction, default=0.5)
    command.set_defaults(handler=_cmd_train)


def _add_run_dir(command) -> None:
    command.add_argument("--run-dir", type=Path, help=f"run directory (default: ${RUN_DIR_ENV})")


def _run_dir(args: argparse.Namespace) -> Path:
    run_dir = args.run_dir or (Path(os.environ[RUN_DIR_ENV]) if os.environ.get(RUN_DIR_ENV) else None)
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
    from training.dataset import generate_dataset

    out = args.out or args.data_dir / "datasets" / "waldo"
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
    from training.dataset import is_dataset
    from training.experiment import default_precision

    run_dir = _run_dir(args)
    if args.init_checkpoint and not _is_local_checkpoint(args.init_checkpoint):
        raise UsageError(
            f"--init-checkpoint {args.init_checkpoint}: no checkpoint there (a local directory "
            "or a checkpoint prefix with its .index file)"
        )
    if args.dataset is not None and not is_dataset(args.dataset):
        raise UsageError(f"--dataset {args.dataset}: no train*.tfrecord there")
    if args.init_checkpoint and args.framework == "torch":
        raise UsageError("--init-checkpoint is for --framework tf (the torch path trains from scratch)")
    from training.trainer import StopRequest, TrainOptions, train

    stop = StopRequest()
    stop.install()
    device = _prepare(args.device, args.framework)
    dataset = args.dataset or _default_dataset(args.data_dir)
    precision = args.precision or default_precision(args.device)
    if args.framework == "torch" and not args.precision:
        from training.torch_backend import default_torch_precision

        precision = default_torch_precision(args.device)
    options = TrainOptions(
        framework=args.framework,
        run_dir=run_dir,
        dataset=dataset,
        device=args.device,
        duration_s=args.duration,
        preset=args.preset,
        batch_size=args.batch,
        precision=precision,
        init_checkpoint=args.init_checkpoint,
        max_steps=args.max_steps,
        checkpoint_every_s=args.checkpoint_every,
        seed=args.seed,
    )
    if options.precision == "float16" and args.device == "cpu":
        print(
            "note: float16 is emulated on CPUs and many times slower; bfloat16 or float32 suit a CPU",
            flush=True,
        )
    result = train(options, device, stop, process_start)
    if result.status == "interrupted":
        return 128 + (stop.signum or signal.SIGINT)
    if args.no_export:
        return EXIT_OK
    return _after_training(run_dir, args, stop, args.device)


def _is_local_checkpoint(path: str) -> bool:
    return Path(path).is_dir() or Path(f"{path}.index").is_file()


def _default_dataset(data_dir: Path) -> Path:
    from training.dataset import generate_dataset, is_current_synthetic, is_dataset

    path = data_dir / "datasets" / "waldo"
    if not is_dataset(path):
        print(
            f"no dataset at {path}: generating the default one (256 train + 32 held-out images)", flush=True
        )
        generate_dataset(path)
    elif not is_current_synthetic(path):
        print(f"{path} was drawn by an older generator: generating it again", flush=True)
        generate_dataset(path)
    return path


def _after_training(run_dir: Path, args: argparse.Namespace, stop, device: str) -> int:
    from training.inference.command import infer, phase_options
    from training.postrun import draw_detections, evaluate_model, export_model
    from training.runlog import Phase

    score_threshold = args.score_threshold
    phases: list[tuple[str, Callable[[], dict]]] = [
        ("export", lambda: export_model(run_dir)),
        ("evaluate", lambda: evaluate_model(run_dir, score_threshold=score_threshold, device=device)),
        ("detect", lambda: draw_detections(run_dir, score_threshold=score_threshold, device=device)),
    ]
    if (options := phase_options(args, run_dir)) is not None:
        phases.append(("infer", lambda: infer(options, lambda: stop.signum is not None)))
    for name, action in phases:
        if stop.signum is not None:
            print(f"skipping {name}: interrupted", flush=True)
            return 128 + stop.signum
        with Phase(run_dir, name) as phase:
            try:
                _report(name, action())
            except Exception as exc:
                phase.ok = False
                print(
                    f"training: error: {name} failed: {' '.join(str(exc).split())}",
                    file=sys.stderr,
                    flush=True,
                )
                return EXIT_FAILED
    return 128 + stop.signum if stop.signum is not None else EXIT_OK


def _report(name: str, result: dict) -> None:
    if name == "export":
        kind = {"torchscript": "TorchScript", "state_dict": "state dict"}.get(
            result.get("format"), "SavedModel"
        )
        print(f"export: {kind} of step {result['global_step']} in model/", flush=True)
    elif name == "evaluate":
        print(
            f"evaluate: mAP@0.5 {result['map_50']:.3f}  recall {result['recall_50']:.3f}  "
            f"precision {result['precision_50']:.3f} on {result['num_images']} held-out images",
            flush=True,
        )
    elif name == "detect":
        print(f"detect: {len(result['images'])} images with boxes in detections/", flush=True)
    else:
        from training.inference.measure import measured_runtimes

        print(f"infer: measured {', '.join(measured_runtimes(result))} into inference.csv, inference.json")


def _prepare(device: str, framework: str = "tf"):
    from training.device import prepare_device, prepare_torch_device

    return prepare_torch_device(device) if framework == "torch" else prepare_device(device)


def _run_framework(run_dir: Path) -> str:
    """`torch` for a run trained with --framework torch, else `tf` (what training.json says)."""
    from runformat import TRAINING_JSON, read_json

    try:
        return "torch" if read_json(run_dir / TRAINING_JSON).get("framework") == "torch" else "tf"
    except ValueError:
        return "tf"


def _standalone(args: argparse.Namespace, name: str, action: Callable[[Path], dict]) -> int:
    from training.runlog import Phase

    run_dir = _existing_run_dir(args)
    _prepare(args.device, _run_framework(run_dir))
    with Phase(run_dir, name):
        result = action(run_dir)
    _report(name, result)
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


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def _non_negative_int(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return int(text)


def _image_size(text: str) -> int:
    value = _positive_int(text)
    if not 64 <= value <= 2048:
        raise argparse.ArgumentTypeError(f"image size must be 64..2048 pixels, got {value}")
    return value


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}")
    return value
