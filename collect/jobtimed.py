"""`python -m collect timed DURATION [OPTIONS] -- COMMAND`: the user's own training job, for DURATION.

The collector runs COMMAND (its whole process group) while it samples, and stops it at DURATION as
`collect run` does: SIGINT, SIGTERM after the grace period, SIGKILL last. Nothing of ours runs before or
after it. What the job says about its progress (its output through --progress-regex / --progress-format,
or the WORKBENCH_PROGRESS protocol file) becomes the run's training.csv and training.json
(collect.jobrecord), so `python -m sizing` sizes it as it sizes our training.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from collect import preflight
from collect.jobpatterns import FORMATS, PatternError, compile_patterns
from collect.jobrecord import JobDeclared, JobRecorder, job_environment
from collect.options import timed_parser
from collect.progress import ProgressReporter
from collect.session import SessionError, SessionOptions, SessionResult, run_session
from collect.sources import Hardware
from collect.sources.nvml import nvml_text, visible_gpu_indices
from collect.usage import batch_problem, command_problem, data_dir_problem, job_precision_problem
from runformat import format_duration, parse_duration
from runformat.bursts import burst_ends, bursts_hint, bursts_text, worth_saying
from runformat.cli import USAGE_ERROR
from runformat.duration import parse_interval
from runformat.progress import step_rows
from runformat.records import MIN_FLOPS_PER_EXAMPLE

NO_GPU = 1
SHOWN_LAST_LINES = 8


def add_progress_options(parser: argparse.ArgumentParser) -> None:
    """The options that say how to read a job's progress and what the job is (also `collect run`'s)."""
    parser.add_argument(
        "--progress-regex", action="append", metavar="REGEX",
        help="a regular expression with named groups step, batch, epoch, examples, loss, searched in each "
        "line of the job's output (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--progress-format", choices=tuple(FORMATS), help="ready patterns for the progress lines of a library"
    )
    parser.add_argument(
        "--workload-name", help="what the job is (runs that share it compare; default: COMMAND)"
    )
    parser.add_argument("--batch", type=int, help="the job's global batch (examples per step): examples/s")
    parser.add_argument("--precision", help="what the job trains in: float32, bf16-mixed, mixed_float16...")
    parser.add_argument(
        "--flops-per-example", type=float, metavar="FLOPS",
        help="forward + backward FLOPs of one training example (about 3 × the forward pass's): the MFU",
    )  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = timed_parser(
        "Run your own training COMMAND for DURATION while sampling the system, and size it.",
        "exit codes: the job's own when it ended by itself, 124 when DURATION stopped it, 130 when "
        "interrupted, 2 for a usage error, 1 when --device gpu finds no GPU or the collector failed.",
        "how long the job may run: 90s, 75m, 2h, 1h30m",
    )
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    add_progress_options(parser)
    parser.add_argument("--verbose", action="store_true", help="show the job's output, not a progress line")
    parser.add_argument("--prometheus", metavar="HOST:PORT", help="also serve each sample at /metrics")
    return parser


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(options, COMMAND) around the first `--`."""
    argv = list(argv)
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1 :]


def options_problem(args: argparse.Namespace, command: list[str]) -> str | None:
    if not command:
        return "missing command after --"
    if problem := batch_problem(args.batch) or job_precision_problem(args.precision):
        return problem
    if args.workload_name is not None and not args.workload_name.strip():
        return "--workload-name is empty"
    flops = args.flops_per_example
    if flops is not None and not (math.isfinite(flops) and flops > 0):
        return f"--flops-per-example {flops:g}: expected a number of FLOPs > 0 (e.g. 7.8e9)"
    if flops is not None and flops < MIN_FLOPS_PER_EXAMPLE:
        return (
            f"--flops-per-example {flops:g}: fewer FLOPs than any network's training example "
            f"({MIN_FLOPS_PER_EXAMPLE:g}): give FLOPs, not GFLOPs (e.g. 7.8e9)"
        )
    return data_dir_problem(args.data_dir) or command_problem(command)


def declared_of(args: argparse.Namespace) -> JobDeclared:
    """What the command line says the job is."""
    return JobDeclared(args.workload_name, args.batch, args.precision, args.flops_per_example)


def gpu_problem(hardware: Hardware) -> str | None:
    """None when NVML sees a GPU this job may use (after CUDA_VISIBLE_DEVICES), else why not."""
    try:
        nvml = hardware.load_nvml()
        nvml.nvmlInit()
    except Exception as exc:
        return f"no GPU: NVML cannot start ({nvml_text(exc) or type(exc).__name__})"
    try:
        uuids = [nvml_text(nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(i)))
                 for i in range(nvml.nvmlDeviceGetCount())]  # fmt: skip
    except Exception as exc:
        return f"no GPU: NVML cannot list the GPUs ({nvml_text(exc) or type(exc).__name__})"
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()
    environ = hardware.environ if hardware.environ is not None else dict(os.environ)
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if not visible_gpu_indices(visible, uuids):
        hidden = f" (CUDA_VISIBLE_DEVICES={visible!r} hides {len(uuids)})" if uuids else ""
        return f"no GPU: NVML sees none{hidden}"
    return None


def main(argv: Sequence[str], hardware: Hardware | None = None) -> int:
    head, command = split_command(argv)
    if any(option.split("=")[0] in ("--tune", "--tune-budget", "--tune-space") for option in head):
        return _usage(
            "--tune searches the settings of our training workload; your own job's batch, precision and "
            "compiler are its own options (run it once per setting: docs/tuning.md)"
        )
    args = build_parser().parse_args(head)
    hardware = hardware or Hardware()
    try:
        budget_s = parse_duration(args.duration)
        interval_s = parse_interval(args.interval)
        patterns = compile_patterns(args.progress_regex, args.progress_format)
    except (ValueError, PatternError) as exc:
        return _usage(str(exc))
    problem = options_problem(args, command)
    if problem:
        return _usage(problem)
    no_room, _ = preflight.space_check(preflight.job_plan(budget_s, interval_s, args.device), args.data_dir)
    if no_room:  # only the collector's own files are counted: too little for those is too little
        return _usage(f"{no_room} (the job's own files not counted)")
    if args.device == "gpu" and (reason := gpu_problem(hardware)) is not None:
        print(f"python -m collect timed: error: {reason}", file=sys.stderr)
        return NO_GPU
    exposition = None
    if args.prometheus is not None:
        from collect.exposition import ExpositionError, PrometheusExposition

        try:
            exposition = PrometheusExposition(args.prometheus)
        except ExpositionError as exc:
            return _usage(str(exc))
    declared = declared_of(args)
    recorder = JobRecorder(command, patterns, declared, args.device, budget_s)
    try:
        return _run(args, command, recorder, budget_s, interval_s, hardware, exposition)
    finally:
        recorder.stop()
        if exposition is not None:
            exposition.close()


def _usage(problem: str) -> int:
    print(f"python -m collect timed: error: {problem}", file=sys.stderr)
    return USAGE_ERROR


def _run(
    args: argparse.Namespace,
    command: list[str],
    recorder: JobRecorder,
    budget_s: float,
    interval_s: float,
    hardware: Hardware,
    exposition: Any,
) -> int:
    progress = ProgressReporter(budget_s, sys.stdout, every_s=math.inf if args.verbose else None, job=True)

    def on_start(run_dir: Path) -> None:
        recorder.start(run_dir)
        progress.start(run_dir)
        with contextlib.suppress(OSError, ValueError):
            print(f"Recording into {run_dir} (Ctrl-C stops the job and keeps everything so far)", flush=True)

    environ = hardware.environ if hardware.environ is not None else dict(os.environ)
    options = SessionOptions(
        data_dir=args.data_dir,
        device=args.device,
        interval_s=interval_s,
        duration_s=budget_s,
        label=args.label or f"{args.device} job {_short(shlex.join(command), 40)} {args.duration}",
        command=command,
        echo_output=args.verbose,
        hardware=hardware,
        tick_sink=exposition,
        extra_record={"job": recorder.run_record()},
        extra_env=job_environment(args.device, recorder.patterns, environ),
        output_sink=recorder.on_output,
    )
    try:
        result = run_session(options, on_start=on_start, on_sample=progress.on_sample)
    except SessionError as exc:
        print(f"collect: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # recorded in run.json; the job was stopped gracefully
        recorder.finish("failed", None, f"collector error: {type(exc).__name__}: {exc}".splitlines()[0])
        print(f"collect: collector error: {type(exc).__name__}: {exc}".splitlines()[0], file=sys.stderr)
        return 1
    training = recorder.finish(result.end_reason, None)
    progress.finish()
    with contextlib.suppress(OSError, ValueError):  # the run is recorded; a closed console only loses this
        lines = summary_lines(result, training, recorder, matching_command(args, command))
        print("\n".join(lines), flush=True)
    return result.exit_code


def summary_lines(
    result: SessionResult, training: dict, recorder: JobRecorder, matching: str | None = None
) -> list[str]:
    """The end of a job's run: how it ended, its progress (or why none), its devices, where things are."""
    run_dir = result.run_dir
    ended = f"{result.end_reason} (exit code {result.exit_code})"
    lines = [f"Run {run_dir.name}: {ended}, {result.samples} samples"]
    lines.append(f"  job: {_short(shlex.join(recorder.command), 100)}")
    lines += progress_lines(training, recorder)
    used = training.get("device_used") or "not known"
    lines.append(f"  device: {used} ({training.get('gpus_used_from')})")
    lines.append(f"  run directory: {run_dir}")
    lines.append(f"  size it: python -m sizing --out report.md {run_dir}")
    if matching:
        lines.append(f"  the same job on the other device: {matching}")
    return lines


def step_log_bursts(path: Path, start_unix: float | None) -> int:
    """How many bursts training.csv's rows came in (runformat.bursts); 0 when each row is timed."""
    rows = step_rows(path)
    ends = burst_ends([row.time_unix for row in rows], start_unix) if rows is not None else None
    return len(ends) if ends else 0


def progress_lines(training: dict, recorder: JobRecorder) -> list[str]:
    """One line for the steps (or for their absence, with the job's last lines), one per input problem."""
    progress = training.get("progress") or {}
    steps = recorder.steps
    lines = []
    if steps is not None and steps.rows and steps.first is not None and steps.last is not None:
        span = steps.last.time_unix - steps.first.time_unix
        rate = (steps.last.step - steps.first.step) / span if span > 0 else None
        text = f"  progress: step {steps.last.step} ({steps.rows} rows, from the {progress.get('from')})"
        bursts = step_log_bursts(steps.path, training.get("start_unix"))
        text += f", {rate:.3g} steps/s after the first" if rate and not worth_saying(bursts) else ""
        text += f", first step after {training.get('first_step_s')} s"
        text += f", loss {steps.last.loss:.4g}" if steps.last.loss is not None else ""
        lines.append(text)
        if worth_saying(bursts):
            lines.append(f"  warning: the rows {bursts_text(bursts)}: {bursts_hint(progress.get('from'))}")
    else:
        ran = (training.get("end_unix") or 0) - (training.get("start_unix") or 0)
        asked = progress.get("patterns") or "no pattern"
        output = f"{progress.get('output_bytes', 0)} bytes of output"
        lines.append(f"  progress: {progress.get('note')} (the job ran {format_duration(max(ran, 0))}; "
                     f"{asked}; {output}); its last lines:")  # fmt: skip
        lines += [f"    {line}" for line in (progress.get("last_lines") or [])[-SHOWN_LAST_LINES:]]
    if progress.get("protocol_malformed"):
        why = ", ".join(f"{what}: {n}" for what, n in (progress.get("protocol_problems") or {}).items())
        lines.append(f"  protocol: {progress['protocol_malformed']} malformed lines skipped ({why})")
    if progress.get("cut_lines"):
        lines.append(f"  output: {progress['cut_lines']} lines longer than 64 KiB were cut for matching "
                     "(command.log has them whole)")  # fmt: skip
    if progress.get("output_steps_ignored"):
        lines.append(f"  output: {progress['output_steps_ignored']} steps from the patterns ignored: the "
                     "protocol's steps count")  # fmt: skip
    if progress.get("error"):
        lines.append(f"  error: {progress['error']}")
    return lines


def matching_command(args: argparse.Namespace, command: list[str]) -> str:
    """The script call that records the same job on the other device (a like-for-like pair)."""
    other = "gpu" if args.device == "cpu" else "cpu"
    parts = [f"./scripts/collect_{other}.sh", args.duration]
    if args.progress_format:
        parts += ["--progress-format", args.progress_format]
    for regex in args.progress_regex or []:
        parts += ["--progress-regex", regex]
    declared = (("--workload-name", args.workload_name), ("--batch", args.batch),
                ("--precision", args.precision), ("--flops-per-example", args.flops_per_example))  # fmt: skip
    for flag, value in declared:
        if value is not None:
            parts += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    if args.data_dir != Path("data"):
        parts += ["--data-dir", str(args.data_dir)]
    return shlex.join([*parts, "--", *command])


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
