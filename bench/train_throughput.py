"""Training throughput of the `small` preset, and our harness against the framework's own plain loop.

1. steps_per_s: a real `python -m training train --max-steps N --no-export` run; its training.json
   `steady_steps_per_s` (first 20 steps excluded, wall time, as the product reports it).
2. harness_ratio: ONE process runs Model Garden's plain `train_lib.run_experiment` (loops of 10 steps)
   on the same ExperimentConfig (training.experiment.build_config). After each of its loops, a
   train action runs 10 steps of our harness (training.trainer.run_loop on its own TrainingSession, with
   its CSV writing and checks). The two alternate every few seconds, so load from other processes on
   this shared machine hits both alike. Each side's rate is 10 / the median time of its 10-step chunks,
   skipping the first two chunks (graph tracing, warm-up). The ratio is ours / theirs.

With `--framework torch` the baseline is a plain torchvision loop (forward, sum of the losses,
zero_grad, backward, clip, step, `loss.item()` every step, as torchvision's reference script does) on
its own model and optimizer, alternating with chunks of our harness (training.trainer.run_loop on a
TorchSession) in the same process. It also times our harness reading the losses every 10 steps
instead of every step (`deferred_read_ratio`, = every-10 / every-step; the loop's choice on a GPU).

    .venv/bin/python bench/train_throughput.py                  # ~4 min on 2 cores
    .venv/bin/python bench/train_throughput.py --framework torch
    .venv/bin/python bench/train_throughput.py --preset standard --cli-steps 9 --no-baseline
    .venv/bin/python bench/train_throughput.py --quick          # torch, a few steps: seconds
    python3 bench/train_throughput.py --framework torch --device gpu --batch 8   # on an NVIDIA GPU
    python3 bench/train_throughput.py --framework torch --device gpu --batch 8 --precision bfloat16 \
        --channels-last --compile                   # at a tuned setting (docs/tuning.md): both sides at it

At a tuned setting (torch) both sides run at it: the same precision (autocast; float16 with a gradient
scaler on a GPU), TF32, intra-op threads, channels-last model and images, and the backbone compiled.

Last line: `steps_per_s=<x> harness_ratio=<y> deferred_read_ratio=<z>` (goal: ratio >= 0.98; z is nan for tf).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHUNK = 10
SKIPPED_CHUNKS = 2
QUICK_CHUNK = 1


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--framework", choices=["tf", "torch"], default="tf")
    parser.add_argument("--quick", action="store_true", help="torch, tiny counts: checks it works")
    parser.add_argument("--chunk", type=int, default=CHUNK, help=argparse.SUPPRESS)
    parser.add_argument("--preset", choices=["small", "standard"], default="small")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--precision", choices=["float32", "bfloat16", "float16"], default="float32")
    parser.add_argument(
        "--tf32",
        action=argparse.BooleanOptionalAction,
        help="torch, GPU: TF32 on (--no-tf32: off); default: torch's",
    )
    parser.add_argument("--channels-last", action="store_true", help="torch: NHWC model and images")
    parser.add_argument("--compile", action="store_true", help="torch: the backbone compiled")
    parser.add_argument("--threads", type=int, help="intra-op threads (default: the framework's)")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu", help="gpu: torch only")
    parser.add_argument("--cli-steps", type=int, default=80, help="steps of the real CLI run")
    parser.add_argument("--chunks", type=int, default=12, help="10-step chunks of each side, interleaved")
    parser.add_argument("--no-baseline", action="store_true", help="only the CLI run")
    parser.add_argument("--interleaved-worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--dataset", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.interleaved_worker:
        if args.framework == "torch":
            return _torch_interleaved_worker(args)
        return _interleaved_worker(args)
    if args.cli_steps < 3 or args.chunks < SKIPPED_CHUNKS + 3:
        parser.error(f"--cli-steps must be >= 3 and --chunks >= {SKIPPED_CHUNKS + 3}")
    skipped = SKIPPED_CHUNKS
    if args.quick:  # one chunk a side, none skipped: it checks that the bench works, it measures nothing
        args.framework, args.cli_steps, args.chunks, args.chunk, skipped = "torch", 3, 1, QUICK_CHUNK, 0
    if args.device == "gpu" and args.framework != "torch":
        parser.error("--device gpu needs --framework torch")
    tuned = args.channels_last or args.compile or args.threads or args.precision != "float32"
    tuned = tuned or args.tf32 is not None
    if args.framework != "torch" and tuned:
        parser.error("a setting other than float32 (--precision, --tf32, ...) is for --framework torch here")

    with tempfile.TemporaryDirectory(prefix="train-throughput-") as scratch:
        root = Path(scratch)
        dataset = root / "waldo"
        _run(
            [
                sys.executable,
                "-m",
                "training",
                "dataset",
                "--out",
                str(dataset),
                "--train",
                "8" if args.quick else "64",
                "--val",
                "2",
            ]
        )
        cli = _cli_run(args, dataset, root / "cli")
        print(
            f"cli run: {cli['steps']} steps, first step {cli['first_step_s']:.1f} s, "
            f"steady {cli['steady_steps_per_s']:.4f} steps/s ({1 / cli['steady_steps_per_s']:.3f} s/step, "
            f"{cli['warmup_steps_excluded']} warm-up steps excluded)",
            flush=True,
        )
        if args.no_baseline:
            print(f"framework={args.framework} device={args.device} preset={args.preset} batch={args.batch} "
                  f"setting={' '.join(_setting_args(args))}")  # fmt: skip
            print(f"steps_per_s={cli['steady_steps_per_s']:.4f}")
            return 0
        out = root / "interleaved.json"
        _run(
            [
                sys.executable,
                __file__,
                "--interleaved-worker",
                str(out),
                "--dataset",
                str(dataset),
                "--preset",
                args.preset,
                "--batch",
                str(args.batch),
                "--chunks",
                str(args.chunks),
                "--chunk",
                str(args.chunk),
                "--framework",
                args.framework,
                "--device",
                args.device,
                *_setting_args(args),
            ],
            args.device,
        )
        chunks = json.loads(out.read_text())
    rates = {side: _rate(times[skipped:], args.chunk) for side, times in chunks.items()}
    baseline = "plain torchvision loop" if args.framework == "torch" else "run_experiment"
    for side, rate in rates.items():
        spread = ", ".join(f"{args.chunk / c:.3f}" for c in chunks[side][skipped:])
        name = f"theirs ({baseline})" if side == "theirs" else side
        print(f"{name}: {rate:.4f} steps/s by chunk median; chunks: {spread}")
    print(
        f"framework={args.framework} device={args.device} preset={args.preset} batch={args.batch} "
        f"setting={' '.join(_setting_args(args))} "
        f"interleaved chunks={args.chunks} x {args.chunk} steps per side"
    )
    last = f"steps_per_s={cli['steady_steps_per_s']:.4f} harness_ratio={rates['ours'] / rates['theirs']:.4f}"
    deferred = rates["ours_read10"] / rates["ours"] if "ours_read10" in rates else math.nan
    last += f" deferred_read_ratio={deferred:.4f}"  # nan for TensorFlow: its loop has no deferred read
    print(last)
    return 0


def _rate(chunk_seconds: list[float], chunk: int = CHUNK) -> float:
    return chunk / statistics.median(chunk_seconds)


def _cli_run(args: argparse.Namespace, dataset: Path, run_dir: Path) -> dict:
    _run(
        [
            sys.executable,
            "-m",
            "training",
            "train",
            "--run-dir",
            str(run_dir),
            "--dataset",
            str(dataset),
            "--framework",
            args.framework,
            "--device",
            args.device,
            *_setting_args(args),
            "--preset",
            args.preset,
            "--batch",
            str(args.batch),
            "--max-steps",
            str(args.cli_steps),
            "--duration",
            "2h",
            "--checkpoint-every",
            "2h",
            "--no-export",
        ],
        args.device,
    )
    return json.loads((run_dir / "training.json").read_text())


def _setting_args(args: argparse.Namespace) -> list[str]:
    """The setting's options but its batch, as `python -m training train` and the worker both take them."""
    from runformat.tuning import Setting

    setting = Setting(args.batch, args.precision, args.tf32, args.channels_last, args.compile, args.threads)
    return setting.train_args()[2:]  # without --batch N: each command gives its own


def _run(command: list[str], device: str = "cpu") -> None:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "-1"} if device == "cpu" else dict(os.environ)
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"failed ({done.returncode}): {' '.join(command)}")


def _interleaved_worker(args: argparse.Namespace) -> int:
    """run_experiment with a train action that runs our harness for one chunk after each of its loops."""
    from training.device import prepare_device

    device = prepare_device("cpu")
    import tensorflow as tf
    from official.core import task_factory, train_lib
    from official.vision.tasks import maskrcnn  # noqa: F401

    from training.experiment import build_config
    from training.runlog import TrainingCsv
    from training.tf_backend import TrainingSession
    from training.trainer import StepClock, StopRequest, TrainOptions, run_loop

    work = args.interleaved_worker.parent
    params = build_config(
        preset=args.preset, dataset=args.dataset, batch_size=args.batch, precision="float32", seed=0
    )
    steps = args.chunks * CHUNK
    params.override(
        {
            "trainer": {
                "train_steps": steps,
                "steps_per_loop": CHUNK,
                "summary_interval": steps,
                "checkpoint_interval": steps,
            }
        },
        is_strict=True,
    )

    ours_dir = work / "ours-interleaved"
    ours_dir.mkdir()
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")  # run_experiment calls our action inside its scope
    session = TrainingSession(params, device, strategy)
    session.restore_or_initialize(ours_dir / "checkpoints")
    options = TrainOptions(
        run_dir=ours_dir,
        dataset=args.dataset,
        duration_s=7200.0,
        batch_size=args.batch,
        checkpoint_every_s=7200.0,
        progress_every_s=7200.0,
    )
    clock, stop, log, state = StepClock(start_unix=time.time()), StopRequest(), TrainingCsv(ours_dir), {}
    chunks: dict[str, list[float]] = {"ours": [], "theirs": []}
    previous_action_end = [time.time()]

    def our_chunk(_their_output) -> None:
        started = time.time()
        chunks["theirs"].append(started - previous_action_end[0])
        run_loop(
            dataclasses.replace(options, max_steps=len(clock.ends) + CHUNK), session, clock, stop, log, state
        )
        chunks["ours"].append(time.time() - started)
        previous_action_end[0] = time.time()

    with strategy.scope():
        task = task_factory.get_task(params.task, logging_dir=str(work / "theirs"))
    train_lib.run_experiment(
        distribution_strategy=strategy,
        task=task,
        mode="train",
        params=params,
        model_dir=str(work / "theirs"),
        run_post_eval=False,
        train_actions=[our_chunk],
    )
    log.close()
    args.interleaved_worker.write_text(json.dumps(chunks))
    sys.stdout.flush()
    os._exit(0)


def _torch_interleaved_worker(args: argparse.Namespace) -> int:
    """Chunks of our harness and of a plain torchvision loop, alternating in one process."""
    from training.device import prepare_torch_device

    prepare_torch_device(args.device)
    import torch
    from torchloop.plain_step import plain_step

    from training.runlog import TrainingCsv
    from training.settings import apply_settings
    from training.torch_backend import TorchSession
    from training.torch_data import TrainBatches
    from training.torch_model import build_model
    from training.torch_settings import compile_backbone, to_channels_last
    from training.trainer import StepClock, StopRequest, TrainOptions, run_loop

    work = args.interleaved_worker.parent
    ours_dir = work / "ours-interleaved"
    ours_dir.mkdir()
    options = TrainOptions(
        run_dir=ours_dir,
        dataset=args.dataset,
        duration_s=7200.0,
        preset=args.preset,
        batch_size=args.batch,
        checkpoint_every_s=7200.0,
        progress_every_s=7200.0,
        framework="torch",
        device=args.device,
        precision=args.precision,
        tf32=args.tf32,
        channels_last=args.channels_last,
        compile=args.compile,
        threads=args.threads,
    )
    apply_settings(options)  # process-wide (threads, TF32): both sides run under it
    session = TorchSession(options, args.device)
    session.restore_or_initialize(ours_dir / "checkpoints")
    clock, stop, log, state = StepClock(start_unix=time.time()), StopRequest(), TrainingCsv(ours_dir), {}

    # The plain loop: same model config and data feeding, none of our harness.
    torch.manual_seed(1)
    model = build_model(session.config).to(session.device).train()
    optimizer = torch.optim.SGD(
        model.parameters(),
        lr=session.learning_rate,
        momentum=0.9,
        weight_decay=session.config["weight_decay"],
    )
    batches = TrainBatches(args.dataset, args.batch, seed=1, device=session.device)
    if args.channels_last:
        to_channels_last(model)
    if args.compile:
        compile_backbone(model)
    step = plain_step(model, optimizer, args.precision, session.device, clip_norm=10.0)

    def plain_chunk() -> None:
        for _ in range(args.chunk):
            step(*batches.next()).item()  # the reference script reads the loss every step

    def our_chunk(read_every: int) -> None:
        chunk_options = dataclasses.replace(
            options, max_steps=len(clock.ends) + args.chunk, read_losses_every=read_every
        )
        run_loop(chunk_options, session, clock, stop, log, state)

    chunks: dict[str, list[float]] = {"ours": [], "theirs": [], "ours_read10": []}
    for _ in range(args.chunks):
        for side, action in (
            ("theirs", plain_chunk),
            ("ours", lambda: our_chunk(1)),
            ("ours_read10", lambda: our_chunk(10)),
        ):
            started = time.time()
            action()
            chunks[side].append(time.time() - started)
    log.close()
    args.interleaved_worker.write_text(json.dumps(chunks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
