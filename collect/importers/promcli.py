"""The command line of `python -m collect import-prometheus`: its options and the times it accepts."""

from __future__ import annotations

import argparse
import time
from datetime import datetime, timezone
from pathlib import Path

from runformat import parse_duration
from runformat.cli import OneLineParser
from runformat.duration import parse_interval

PROG = "python -m collect import-prometheus"


def parse_time(text: str, now: float | None = None) -> float:
    """Unix seconds, ISO 8601 (without a zone: UTC), `now` or `now-90m`."""
    now = time.time() if now is None else now
    stripped = text.strip()
    if stripped == "now":
        return now
    if stripped.startswith("now-"):
        return now - parse_duration(stripped[4:])
    try:
        return float(stripped)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(stripped.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is not a time: use unix seconds, ISO 8601, now or now-1h") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def _time_type(text: str) -> float:
    try:
        return parse_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _step_type(text: str) -> float:
    try:
        return parse_interval(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=PROG,
        description="Rebuild a run directory from a Prometheus server that scrapes node_exporter "
        "(and dcgm-exporter), for one host and time range.",
    )
    parser.add_argument("url", help="the Prometheus server, e.g. http://prometheus:9090")
    parser.add_argument("--instance", required=True, help="node_exporter's instance label: HOST or HOST:PORT")
    parser.add_argument(
        "--gpu-instance", help="dcgm-exporter's instance label (default: the same host, any port)"
    )
    parser.add_argument("--start", required=True, type=_time_type, help="unix seconds, ISO 8601, now-2h")
    parser.add_argument("--end", required=True, type=_time_type, help="unix seconds, ISO 8601, now")
    parser.add_argument(
        "--step", type=_step_type, help="row spacing (default: node_exporter's scrape interval)"
    )
    parser.add_argument("--data-dir", type=Path, default=Path("data"), help="runs/<run_id>/ goes here")
    parser.add_argument("--label", default="", help="label shown in the dashboard")
    parser.add_argument(
        "--steps-metric",
        metavar="SELECTOR",
        help="the job's training-step counter, e.g. 'trainer_step{job=\"detector\"}' "
        "(default: workbench_training_step of --instance); gives training.csv",
    )
    parser.add_argument(
        "--examples-metric",
        metavar="SELECTOR",
        help="its examples/s gauge (default: workbench_examples_per_second)",
    )
    return parser
