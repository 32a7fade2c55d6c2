"""Steady-state training throughput of our harness, against Model Garden's own `train_lib.run_experiment`.

Both run the same ExperimentConfig (training.experiment.build_config) for the same number of steps, in
separate processes, in the order ours, theirs, theirs, ours (so a linear drift in machine load cancels).
Steady state excludes the first 20 steps (graph tracing and warm-up) in both.

    .venv/bin/python bench/train_throughput.py                      # small preset, ~4-5 min on 2 cores
    .venv/bin/python bench/train_throughput.py --preset standard --steps 9 --rounds 1 --no-baseline

Last line: `steps_per_s=<ours> harness_ratio=<ours / run_experiment>` (goal: ratio >= 0.98).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WARMUP_STEPS = 20


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", choices=["small", "standard"], default="small")
    parser.add_argument("--steps", type=int, default=80, help="steps per run (a multiple of 10)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each side")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--no-baseline", action="store_true", help="measure only our harness")
    parser.add_argument("--baseline-worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--dataset", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.baseline_worker:
        return _baseline_worker(args)
    if not args.no_baseline and (args.steps % 10 or args.steps < 3 * WARMUP_STEPS):
        parser.error(
            f"--steps must be a multiple of 10, at least {3 * WARMUP_STEPS}, to compare with the baseline"
        )
    if args.steps < 3:
        parser.error("--steps must be at least 3")

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
                "64",
                "--val",
                "4",
            ]
        )
        results: dict[str, list[float]] = {"ours": [], "theirs": []}
        for side in _order(args.rounds, baseline=not args.no_baseline):
            run_dir = root / f"{side}-{len(results[side])}"
            rate = _ours(args, dataset, run_dir) if side == "ours" else _theirs(args, dataset, run_dir)
            results[side].append(rate)
            print(f"{side:6s} run {len(results[side])}: {rate:.4f} steps/s", flush=True)
    ours = statistics.fmean(results["ours"])
    print(
        f"preset={args.preset} batch={args.batch} steps_per_run={args.steps} warmup_excluded={WARMUP_STEPS}"
    )
    print(f"ours:   {', '.join(f'{r:.4f}' for r in results['ours'])} steps/s ({1 / ours:.3f} s/step)")
    if not results["theirs"]:
        print(f"steps_per_s={ours:.4f}")
        return 0
    theirs = statistics.fmean(results["theirs"])
    print(f"theirs: {', '.join(f'{r:.4f}' for r in results['theirs'])} steps/s ({1 / theirs:.3f} s/step)")
    print(f"steps_per_s={ours:.4f} harness_ratio={ours / theirs:.4f}")
    return 0


def _order(rounds: int, baseline: bool) -> list[str]:
    """ours, theirs, theirs, ours, ... so that a steady drift in machine load hits both sides alike."""
    if not baseline:
        return ["ours"] * rounds
    return [
        side for i in range(rounds) for side in (("ours", "theirs") if i % 2 == 0 else ("theirs", "ours"))
    ]


def _ours(args: argparse.Namespace, dataset: Path, run_dir: Path) -> float:
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
            "--preset",
            args.preset,
            "--batch",
            str(args.batch),
            "--max-steps",
            str(args.steps),
            "--duration",
            "2h",
            "--checkpoint-every",
            "2h",
            "--no-export",
        ]
    )
    info = json.loads((run_dir / "training.json").read_text())
    if info["warmup_steps_excluded"] != WARMUP_STEPS and args.steps >= 3 * WARMUP_STEPS:
        raise SystemExit(f"unexpected warm-up exclusion {info['warmup_steps_excluded']}")
    return float(info["steady_steps_per_s"])


def _theirs(args: argparse.Namespace, dataset: Path, run_dir: Path) -> float:
    out = run_dir.with_suffix(".json")
    _run(
        [
            sys.executable,
            __file__,
            "--baseline-worker",
            str(out),
            "--dataset",
            str(dataset),
            "--preset",
            args.preset,
            "--batch",
            str(args.batch),
            "--steps",
            str(args.steps),
        ]
    )
    return float(json.loads(out.read_text())["steady_steps_per_s"])


def _run(command: list[str]) -> None:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "-1"}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"failed ({done.returncode}): {' '.join(command)}")


def _baseline_worker(args: argparse.Namespace) -> int:
    """Model Garden's own driver on the same config: loops of 10 steps, no summaries, timed per loop."""
    os.environ["CUDA_VISIBLE_DEVICES"] = "-1"
    import tensorflow as tf
    from official.core import task_factory, train_lib
    from official.vision.tasks import maskrcnn  # noqa: F401

    from training.experiment import build_config

    params = build_config(
        preset=args.preset, dataset=args.dataset, batch_size=args.batch, precision="float32", seed=0
    )
    params.override(
        {
            "trainer": {
                "train_steps": args.steps,
                "steps_per_loop": 10,
                "summary_interval": args.steps,
                "checkpoint_interval": args.steps,
            }
        },
        is_strict=True,
    )
    loop_ends: list[float] = []
    model_dir = args.baseline_worker.with_suffix(".model")
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        task = task_factory.get_task(params.task, logging_dir=str(model_dir))
    train_lib.run_experiment(
        distribution_strategy=strategy,
        task=task,
        mode="train",
        params=params,
        model_dir=str(model_dir),
        run_post_eval=False,
        train_actions=[lambda _output: loop_ends.append(time.time())],
    )
    first_steady_loop = WARMUP_STEPS // 10 - 1
    steady_steps = args.steps - WARMUP_STEPS
    rate = steady_steps / (loop_ends[-1] - loop_ends[first_steady_loop])
    args.baseline_worker.write_text(json.dumps({"steady_steps_per_s": rate, "loops": len(loop_ends)}))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
