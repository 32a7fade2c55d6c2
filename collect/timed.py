"""`python -m collect timed`: one honest measurement of the training workload on one device.

The collector records the run; the training is an opaque command (`python -m training train ...`)
that it launches and stops. The budget is the training's own: export, evaluation and detections after
it run to completion as separate phases. The collector's deadline is only a runaway guard.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from collect import preflight
from collect.devicecount import counts_problem, parse_counts, resolve_gpu_counts, visible_gpu_count
from collect.options import timed_parser
from collect.progress import ProgressReporter
from collect.session import SessionError, SessionOptions, run_session
from collect.sources import Hardware
from collect.sweep import new_sweep, run_sweep, sweep_exit_code, sweep_lines
from collect.timed_summary import summary_lines
from collect.tune_sweep import MIXED_DTYPE, RunRequest, run_tuning, tuning_plan
from collect.usage import (
    FRAMEWORK_NAMES,
    PRECISIONS,
    PRESET_NAMES,
    batch_problem,
    data_dir_problem,
    dataset_problem,
    job_option_without_job,
)
from runformat import COMMAND_LOG, RUN_JSON, TRAINING_JSON, format_duration, parse_duration
from runformat.cli import USAGE_ERROR
from runformat.diskfull import DISK_FULL
from runformat.duration import parse_interval
from runformat.multinode import Nodes, add_node_options, nodes_from_args, nodes_problem
from runformat.records import RunRecord, TrainingRecord, read_record
from runformat.tuning import Setting

NO_GPU = 1


def build_parser() -> argparse.ArgumentParser:
    parser = timed_parser(
        "Train the Faster R-CNN workload for DURATION on one device while sampling the system.",
        "Your own training job instead: python -m collect timed DURATION [OPTIONS] -- COMMAND "
        "(its options: python -m collect timed --help --)",
        "training budget: 90s, 75m, 2h, 1h30m",
    )
    parser.add_argument("--preset", choices=PRESET_NAMES, default="small")
    parser.add_argument(
        "--framework",
        choices=tuple(FRAMEWORK_NAMES),
        default="tf",
        help="tf (Model Garden) or torch (torchvision)",
    )
    parser.add_argument(
        "--batch", type=int, help="batch per device (default: the preset's); global = N x this on N devices"
    )
    parser.add_argument(
        "--procs",
        metavar="N[,N...]",
        help="torch: N data-parallel CPU processes (DDP over gloo); a list is a sweep, one run per count",
    )
    parser.add_argument(
        "--gpus",
        metavar="N[,N...]|all",
        help="N GPUs (torch DDP over NCCL, tf mirrored); a list is a sweep, one run per count",
    )
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        help="float32 (default, on both devices) or mixed (float16 on a GPU, bfloat16 on a CPU)",
    )
    add_node_options(parser)
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--dataset", type=Path, help="dataset to train on (default: DATA_DIR/datasets/waldo)")
    parser.add_argument(
        "--no-export", action="store_true", help="skip export, evaluation, detections and inference"
    )
    parser.add_argument("--no-infer", action="store_true", help="skip the short inference benchmark")
    parser.add_argument("--keep-checkpoints", type=int, metavar="N", help="checkpoints kept (default 3)")
    parser.add_argument("--checkpoint-every", metavar="DURATION", help="between checkpoints (default 60s)")
    parser.add_argument("--max-steps", type=int, help="also stop after this many steps (for quick checks)")
    parser.add_argument(
        "--verbose", action="store_true", help="show the training's output, not a progress line"
    )
    parser.add_argument(
        "--tune",
        action="store_true",
        help="first find the setting that feeds the device best in short trials, then train at it "
        "(docs/tuning.md)",
    )
    parser.add_argument(
        "--tune-budget", metavar="DURATION", help="wall time for the trials (default 20%% of DURATION)"
    )
    parser.add_argument(
        "--tune-space",
        metavar="LIST",
        help="what --tune searches: batch,precision,threads,channels-last,compile,workers (default: "
        "what suits the device and framework)",
    )
    parser.add_argument(
        "--prometheus",
        metavar="HOST:PORT",
        help="also serve each sample at http://HOST:PORT/metrics (PORT alone binds 127.0.0.1)",
    )
    return parser


def hard_limit_s(budget_s: float) -> float:
    """Past this the collector stops the command: room for tracing, checkpoints, export and evaluation."""
    return 2 * budget_s + 30 * 60


def training_command(
    args: argparse.Namespace, count: int | None = None, setting: Setting | None = None
) -> list[str]:
    """The training of one run; `setting` (a --tune run) replaces --batch and --precision."""
    command = [
        sys.executable, "-m", "training", "train",
        "--device", args.device,
        "--duration", args.duration,
        "--preset", args.preset,
        "--data-dir", str(args.data_dir),
    ]  # fmt: skip
    if setting is not None:
        command += setting.train_args()
    elif args.precision is not None:  # else the workload's own default (float32 on every device)
        command += ["--precision", MIXED_DTYPE[args.device] if args.precision == "mixed" else args.precision]
    if args.framework != "tf":
        command += ["--framework", args.framework]
    if args.batch is not None and setting is None:
        command += ["--batch", str(args.batch)]
    if args.dataset is not None:
        command += ["--dataset", str(args.dataset)]
    if args.max_steps is not None:
        command += ["--max-steps", str(args.max_steps)]
    if args.no_export:
        command.append("--no-export")
    if args.no_infer:
        command.append("--no-infer")
    if getattr(args, "no_checkpoint", False):
        command.append("--no-checkpoint")
    if args.keep_checkpoints is not None:
        command += ["--keep-checkpoints", str(args.keep_checkpoints)]
    if args.checkpoint_every is not None:
        command += ["--checkpoint-every", args.checkpoint_every]
    if count is not None:
        command += ["--gpus" if args.device == "gpu" else "--procs", str(count)]
    nodes = nodes_from_args(args)
    if nodes.multinode:
        command += ["--nnodes", str(nodes.count), "--node-rank", str(nodes.rank)]
        command += ["--rdzv-endpoint", str(nodes.endpoint), "--rdzv-id", nodes.rdzv_id]
    return command


def multinode_problem(args: argparse.Namespace) -> str | None:
    """Why the node options cannot run with the others (one line), None when they can."""
    problem = nodes_problem(args)
    if problem or args.nnodes == 1:
        return problem
    if "," in (args.procs or "") or "," in (args.gpus or ""):
        return "a sweep (a list of counts) runs on one node; with --nnodes give one count"
    return None


def nodes_record(args: argparse.Namespace, count: int | None) -> dict:
    """run.json's `nodes`: which node of which training this run was, and where its step log is."""
    nodes: Nodes = nodes_from_args(args)
    if not nodes.multinode:
        return {}
    return {"nodes": nodes.record(count or 1)}


def check_gpu(framework: str = "tf") -> str | None:
    """None if the framework sees a GPU, else the one-line reason `training devices` gave."""
    probe = subprocess.run(
        [sys.executable, "-m", "training", "devices", "--require", "gpu", "--framework", framework],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode == 0:
        return None
    lines = [line for line in (probe.stderr + probe.stdout).splitlines() if line.strip()]
    return lines[-1] if lines else f"{framework} sees no GPU (exit code {probe.returncode})"


def matching_command(args: argparse.Namespace) -> str:
    """The script call that records the same workload on the other device (for a like-for-like pair)."""
    other = "gpu" if args.device == "cpu" else "cpu"
    parts = [f"./scripts/collect_{other}.sh", args.duration, "--preset", args.preset]
    if args.framework != "tf":
        parts += ["--framework", args.framework]
    if args.batch is not None:
        parts += ["--batch", str(args.batch)]
    if args.procs is not None:
        parts += ["--gpus", args.procs]
    elif args.gpus is not None and args.gpus != "all":
        parts += ["--procs", args.gpus]
    if args.precision is not None:
        parts += ["--precision", args.precision]
    if args.data_dir != Path("data"):
        parts += ["--data-dir", str(args.data_dir)]
    if args.max_steps is not None:
        parts += ["--max-steps", str(args.max_steps)]
    if args.checkpoint_every is not None:  # checkpoints take time out of the budget: the same for both
        parts += ["--checkpoint-every", args.checkpoint_every]
    if args.tune:
        parts.append("--tune")
        if args.tune_budget is not None:
            parts += ["--tune-budget", args.tune_budget]
    return " ".join(shlex.quote(p) for p in parts)


def main(argv: Sequence[str]) -> int:
    if "--" in argv:  # `timed DURATION [OPTIONS] -- COMMAND`: the user's own training job
        from collect.jobtimed import main as job_main

        return job_main(argv)
    if problem := job_option_without_job(list(argv)):
        print(f"python -m collect timed: error: {problem}", file=sys.stderr)
        return USAGE_ERROR
    args = build_parser().parse_args(list(argv))
    try:
        budget_s = parse_duration(args.duration)
        interval_s = parse_interval(args.interval)
        args.checkpoint_every_s = args.checkpoint_every and parse_duration(args.checkpoint_every)
    except ValueError as exc:
        print(f"python -m collect timed: error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    if not args.tune and (args.tune_budget is not None or args.tune_space is not None):
        line = "python -m collect timed: error: --tune-budget and --tune-space go with --tune"
        print(line, file=sys.stderr)
        return USAGE_ERROR
    if problem := batch_problem(args.batch):
        print(f"python -m collect timed: error: {problem}", file=sys.stderr)
        return USAGE_ERROR
    if args.keep_checkpoints is not None and args.keep_checkpoints < 1:
        print("python -m collect timed: error: --keep-checkpoints must be at least 1", file=sys.stderr)
        return USAGE_ERROR
    problem = data_dir_problem(args.data_dir) or (args.dataset and dataset_problem(args.dataset))
    problem = problem or counts_problem(args.device, args.framework, args.procs, args.gpus)
    problem = problem or multinode_problem(args)
    counts, count_problem = device_counts(args) if not problem else ([], None)
    if problem or count_problem:
        print(f"python -m collect timed: error: {problem or count_problem}", file=sys.stderr)
        return USAGE_ERROR
    tune_plan, problem = tuning_plan(args, budget_s, counts) if args.tune else (None, None)
    if problem:
        print(f"python -m collect timed: error: {problem}", file=sys.stderr)
        return USAGE_ERROR
    plan = preflight.plan_for(args, budget_s, interval_s, counts)
    no_room, tight = preflight.space_check(plan, args.data_dir)
    if no_room or tight:
        level = "error" if no_room else "warning"
        print(f"python -m collect timed: {level}: {no_room or tight}", file=sys.stderr, flush=True)
    if no_room:
        return USAGE_ERROR
    exposition = _open_exposition(args.prometheus, FRAMEWORK_NAMES[args.framework])
    if exposition is False:
        return USAGE_ERROR
    try:
        if args.device == "gpu" and (reason := check_gpu(args.framework)) is not None:
            print(f"python -m collect timed: error: {reason}", file=sys.stderr)
            return NO_GPU
        if args.tune:
            return run_tuning(tune_plan, lambda request: _run_tuned(args, interval_s, exposition or None,
                                                                  counts[0] if counts else None, request),
                              sys.stdout)  # fmt: skip
        if len(counts) <= 1:
            return _run(args, budget_s, interval_s, exposition or None, counts[0] if counts else None)[0]
        sweep = new_sweep("gpus" if args.device == "gpu" else "procs", counts)
        steps = run_sweep(
            sweep, lambda count, tag: _run(args, budget_s, interval_s, exposition or None, count, tag)
        )
        with contextlib.suppress(OSError, ValueError):
            print("\n".join(sweep_lines(sweep, steps, args.data_dir)), flush=True)
        return sweep_exit_code(steps)
    finally:
        if exposition:
            exposition.close()


def _open_exposition(address: str | None, framework: str) -> Any:
    """None without --prometheus, the listening endpoint, or False after a one-line usage error."""
    if address is None:
        return None
    from collect.exposition import ExpositionError, PrometheusExposition

    try:
        exposition = PrometheusExposition(address, framework=framework)
    except ExpositionError as exc:
        print(f"python -m collect timed: error: {exc}", file=sys.stderr)
        return False
    with contextlib.suppress(OSError, ValueError):
        print(f"Serving Prometheus metrics at {exposition.url}", flush=True)
    return exposition


def device_counts(args: argparse.Namespace, hardware: Hardware | None = None) -> tuple[list[int], str | None]:
    """The device counts asked for ([] for one device as before) and, if they cannot run, why."""
    if args.procs is not None:
        counts = parse_counts(args.procs, "--procs")
        return (counts if isinstance(counts, list) else []), None
    if args.gpus is None:
        return [], None
    hardware = hardware or Hardware()
    visible = visible_gpu_count(hardware.load_nvml, hardware.environ or dict(os.environ))
    return resolve_gpu_counts(parse_counts(args.gpus, "--gpus"), visible)


def _run_tuned(
    args: argparse.Namespace, interval_s: float, exposition: Any, count: int | None, request: RunRequest
) -> tuple[int, Path | None]:
    """One run of a --tune sweep: a trial (no checkpoints, export or inference) or the final run."""
    run_args = argparse.Namespace(**vars(args))
    run_args.duration = format_duration(request.duration_s)
    run_args.label = (
        f"{_label(args, request.duration_s, count)} {request.label_suffix}: {request.setting.text()}"
    )
    if request.trial:
        run_args.no_export = run_args.no_infer = run_args.no_checkpoint = True
        run_args.max_steps = None
    tag = {"tuning": request.tag}
    summary = None if request.trial else matching_command(args)  # the whole tuned command
    return _run(run_args, request.duration_s, interval_s, exposition, count, tag, request.setting, summary)


def _run(
    args: argparse.Namespace,
    budget_s: float,
    interval_s: float,
    exposition: Any,
    count: int | None = None,
    sweep_tag: dict | None = None,
    setting: Setting | None = None,
    summary: str | None = "",
) -> tuple[int, Path | None]:
    """One recorded training; its summary ends with `summary` (the other device's command; "": this run's
    own), none when None."""

    # With --verbose the training's output is the progress; the reporter then only keeps the peaks.
    progress = ProgressReporter(budget_s, sys.stdout, every_s=math.inf if args.verbose else None)

    def on_start(run_dir: Path) -> None:
        progress.start(run_dir)
        with contextlib.suppress(OSError, ValueError):  # a console already gone does not stop the run
            print(f"Recording into {run_dir} (Ctrl-C stops the run and keeps everything so far)", flush=True)

    options = SessionOptions(
        data_dir=args.data_dir,
        device=args.device,
        interval_s=interval_s,
        duration_s=hard_limit_s(budget_s),
        label=_label(args, budget_s, count),
        command=training_command(args, count, setting),
        echo_output=args.verbose,
        tick_sink=exposition,
        extra_record={**(sweep_tag or {}), **nodes_record(args, count)},
    )
    try:
        result = run_session(options, on_start=on_start, on_sample=progress.on_sample)
    except SessionError as exc:
        print(f"collect: {exc}", file=sys.stderr)
        return 1, None
    except Exception as exc:  # recorded in run.json; the training was stopped gracefully
        print(f"collect: collector error: {type(exc).__name__}: {exc}".splitlines()[0], file=sys.stderr)
        return 1, None
    progress.finish()
    if result.exit_code not in (0, 130) and not args.verbose:
        _show_failure(result.run_dir)
    with contextlib.suppress(OSError, ValueError):  # the run is recorded; a closed console only loses this
        if summary is not None:  # a tuning trial's is its one line of the sweep's
            lines = summary_lines(result, progress.peaks, summary or matching_command(args))
            print("\n".join(lines), flush=True)
    return result.exit_code, result.run_dir


def _label(args: argparse.Namespace, budget_s: float, count: int | None) -> str:
    label = args.label or f"{args.device} {args.framework} {args.preset} {format_duration(budget_s)}"
    if count is None:
        return label
    return f"{label} x{count} {'GPUs' if args.device == 'gpu' else 'procs'}"


def _show_failure(run_dir: Path) -> None:
    """A full disk in one line (the collector's own was said when it happened); else the log's tail."""
    run, _ = read_record(RunRecord, run_dir / RUN_JSON)
    failure = (run and run.failure) or {}
    if failure.get("reason") != DISK_FULL:
        _show_log_tail(run_dir)
    elif failure.get("by") != "collector":
        training, _ = read_record(TrainingRecord, run_dir / TRAINING_JSON)
        error = (training and training.error) or f"{DISK_FULL}: {failure.get('path')}"
        line = f"The training stopped: {error}; its traceback is in {run_dir / COMMAND_LOG}"
        with contextlib.suppress(OSError, ValueError):
            print(line, file=sys.stderr)


def _show_log_tail(run_dir: Path, lines: int = 15) -> None:
    log = run_dir / COMMAND_LOG
    try:
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    except OSError:
        return
    with contextlib.suppress(OSError, ValueError):
        print(f"The training failed; last lines of {log}:", file=sys.stderr)
        for line in tail:
            print(f"  {line}", file=sys.stderr)
