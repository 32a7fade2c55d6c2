"""The `run` and `sample` commands: a thin layer over collect.session.run_session."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from collect.importers import nvsmi
from collect.jobpatterns import PatternError, compile_patterns
from collect.jobrecord import JobRecorder, job_environment
from collect.jobtimed import add_progress_options, declared_of, options_problem, progress_lines
from collect.session import (
    EXIT_COLLECTOR_FAILED,
    EXIT_INTERRUPTED,
    MIN_INTERVAL_S,
    SessionError,
    SessionOptions,
    SessionResult,
    run_session,
)
from collect.usage import command_problem, data_dir_problem
from runformat import RUN_JSON, format_duration, read_json
from runformat.cli import OneLineParser, duration_type

EXIT_USAGE = 2

EPILOG = """exit codes: the command's own when it ended by itself (128+N if killed by signal N),
124 when --duration was reached and the command was stopped, 130 when interrupted (Ctrl-C/SIGTERM),
2 for a usage error (nothing started), 1 when the collector itself failed."""


_duration = duration_type()
_interval = duration_type(minimum_s=MIN_INTERVAL_S, what="interval")  # as collect.options.parse_interval


def _grace(text: str) -> float:
    if text.strip() in ("0", "0s"):
        return 0.0
    return _duration(text)


def _add_common(parser: argparse.ArgumentParser, what_duration: str) -> None:
    parser.add_argument("--duration", type=_duration, default=None, help=what_duration)
    parser.add_argument(
        "--interval", type=_interval, default=1.0, help="sampling interval, >= 10ms (default 1s)"
    )
    parser.add_argument(
        "--data-dir", type=Path, default=Path("data"), help="where runs/<run_id>/ goes (default data)"
    )
    parser.add_argument("--label", default="", help="free text stored in run.json")
    parser.add_argument(
        "--device", choices=("cpu", "gpu"), default="cpu", help="what the run is about (default cpu)"
    )
    parser.add_argument(
        "--prometheus",
        metavar="HOST:PORT",
        help="also serve each sample at http://HOST:PORT/metrics (node_exporter and DCGM names; "
        "PORT alone binds 127.0.0.1)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m collect",
        description="Record system telemetry into data/runs/<run_id>/ while a command runs, or on its own.",
        epilog=EPILOG,
    )
    commands = parser.add_subparsers(
        dest="subcommand",
        required=True,
        metavar="{run,sample,timed,import-prometheus,import-sysstat,import-nvidia-smi}",
    )
    run = commands.add_parser("run", help="sample while COMMAND runs", epilog=EPILOG)
    _add_common(run, "stop the command after this long (90s, 75m, 2h, 1h30m); default: until it ends")
    run.add_argument(
        "--sigint-grace", type=_grace, default=20.0, help="wait after SIGINT before SIGTERM (20s)"
    )
    run.add_argument(
        "--sigterm-grace", type=_grace, default=10.0, help="wait after SIGTERM before SIGKILL (10s)"
    )
    run.add_argument("--no-echo", action="store_true", help="keep the command's output in command.log only")
    add_progress_options(run)  # with any of them, the command's progress becomes training.csv (a job)
    run.add_argument(
        "command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...] ({run_dir} is substituted)"
    )
    sample = commands.add_parser("sample", help="sample only, no command", epilog=EPILOG)
    _add_common(sample, "how long to sample; default: until Ctrl-C")
    commands.add_parser("timed", help="a timed training run (see python -m collect timed --help)")
    commands.add_parser(
        "import-prometheus", help="rebuild a run from a Prometheus server's history (see its --help)"
    )
    sysstat = commands.add_parser(
        "import-sysstat", help="a sysstat recording (sa file from sadc/sar -o, or sadf -d text) as a run"
    )
    sysstat.add_argument("file", type=Path, help="e.g. /var/log/sysstat/sa21, or the output of sadf -d")
    sysstat.add_argument("--data-dir", type=Path, default=Path("data"), help="where runs/<run_id>/ goes")
    sysstat.add_argument("--label", default="", help="free text stored in run.json (default: sysstat HOST)")
    nvsmi_parser = commands.add_parser(
        "import-nvidia-smi",
        help="an nvidia-smi log (--query-gpu CSV or dmon) as a run, or merged --into one",
        description="An nvidia-smi log (--query-gpu CSV, dmon -o DT) as a run directory, or its GPU "
        "columns added to an existing run (e.g. an import-sysstat one), aligned by time.",
    )
    nvsmi.add_arguments(nvsmi_parser)
    return parser


def _announce_start(run_dir: Path, interval_s: float, device: str) -> None:
    try:
        sources = read_json(run_dir / RUN_JSON).get("sources", {})
    except ValueError:
        sources = {}
    missing = [
        f"{name} ({entry.get('reason')})" for name, entry in sources.items() if not entry.get("available")
    ]
    print(
        f"collect: recording every {format_duration(interval_s)} into {run_dir}", file=sys.stderr, flush=True
    )
    if missing:
        print(f"collect: not recorded: {'; '.join(missing)}", file=sys.stderr, flush=True)
    if device == "gpu" and not sources.get("nvml", {}).get("available"):
        print(
            "collect: warning: --device gpu but NVML sees no GPU: no GPU columns", file=sys.stderr, flush=True
        )


def _announce_end(result: SessionResult) -> None:
    print(
        f"collect: {result.end_reason}, {result.samples} samples, exit code {result.exit_code}: "
        f"{result.run_dir}",
        file=sys.stderr,
        flush=True,
    )


# Subcommands with a parser of their own: they get their arguments as given.
OWN_PARSERS = {"timed": "collect.timed", "import-prometheus": "collect.importers.prometheus"}


def main(argv: list[str]) -> int:
    """Every `python -m collect` subcommand is dispatched here."""
    if argv and argv[0] in OWN_PARSERS:
        import importlib

        return importlib.import_module(OWN_PARSERS[argv[0]]).main(list(argv[1:]))
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.subcommand == "import-sysstat":
        from collect.importers import sysstat

        return sysstat.main(args.file, args.data_dir, args.label)
    if args.subcommand == "import-nvidia-smi":
        return nvsmi.main(args)
    command: list[str] | None = None
    grace = (20.0, 10.0)
    job: JobRecorder | None = None
    if args.subcommand == "run":
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        problem = command_problem(command)
        if problem is None and _asks_progress(args):
            job, problem = _job(args, command)
        if problem:
            parser.exit(EXIT_USAGE, f"python -m collect run: error: {problem}\n")
        grace = (args.sigint_grace, args.sigterm_grace)
    problem = data_dir_problem(args.data_dir)
    if problem:
        parser.exit(EXIT_USAGE, f"python -m collect {args.subcommand}: error: {problem}\n")
    exposition = None
    if args.prometheus is not None:
        from collect.exposition import ExpositionError, PrometheusExposition

        try:
            exposition = PrometheusExposition(args.prometheus)
        except ExpositionError as exc:
            parser.exit(EXIT_USAGE, f"python -m collect {args.subcommand}: error: {exc}\n")
        print(f"collect: serving Prometheus metrics at {exposition.url}", file=sys.stderr, flush=True)
    options = SessionOptions(
        data_dir=args.data_dir,
        device=args.device,
        interval_s=args.interval,
        duration_s=args.duration,
        label=args.label,
        command=command,
        echo_output=not getattr(args, "no_echo", False),
        stop_grace_s=grace,
        tick_sink=exposition,
    )
    if job is not None:
        options.extra_record = {"job": job.run_record()}
        options.extra_env = job_environment(args.device, job.patterns, dict(os.environ), hide_gpus=False)
        options.output_sink = job.on_output

    def on_start(run_dir: Path) -> None:
        if job is not None:
            job.start(run_dir)
        _announce(_announce_start, run_dir, args.interval, args.device)

    try:
        result = run_session(options, on_start=on_start)
    except ValueError as exc:
        print(f"python -m collect: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SessionError as exc:
        print(f"collect: {exc}", file=sys.stderr)
        return EXIT_COLLECTOR_FAILED
    except Exception as exc:  # recorded in run.json; the command was stopped gracefully
        print(f"collect: collector error: {type(exc).__name__}: {exc}".splitlines()[0], file=sys.stderr)
        return EXIT_COLLECTOR_FAILED
    except KeyboardInterrupt:
        print("collect: interrupted while starting", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if job is not None:
            job.stop()
        if exposition is not None:
            exposition.close()
    if job is not None:
        training = job.finish(result.end_reason, None)
        _announce(lambda: print("\n".join(progress_lines(training, job)), file=sys.stderr, flush=True))
    _announce(_announce_end, result)
    return result.exit_code


def _asks_progress(args: argparse.Namespace) -> bool:
    return any(
        getattr(args, name) is not None
        for name in (
            "progress_regex",
            "progress_format",
            "workload_name",
            "batch",
            "precision",
            "flops_per_example",
        )
    )


def _job(args: argparse.Namespace, command: list[str]) -> tuple[JobRecorder | None, str | None]:
    """The recorder of the command's progress, or the one-line problem with the options that ask for it."""
    try:
        patterns = compile_patterns(args.progress_regex, args.progress_format)
    except PatternError as exc:
        return None, str(exc)
    problem = options_problem(args, command)
    if problem:
        return None, problem
    declared = declared_of(args)
    return JobRecorder(command, patterns, declared, args.device, args.duration, hides_gpus=False), None


def _announce(say, *args) -> None:  # type: ignore[no-untyped-def]
    """Lines for the user; a closed or hung-up console loses them, never the run."""
    with contextlib.suppress(OSError, ValueError):
        say(*args)
