"""`python -m sizing RUN... --out report.md|report.html|report.json [options]`: the sizing report.

RUN is a run id under DATA_DIR/runs or DATA_DIR/examples, the path of a run directory, or a folder of
runs. Bad input prints one line on stderr and exits 2.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from sizing.analysis.load import load_runs
from sizing.context import DEFAULT_TARGET_STEPS, ReportSettings
from sizing.model import DEFAULT_UTILISATION, RunData, UsageError
from sizing.output.render import render_html, render_json, render_markdown
from sizing.report import build_report
from sizing.settings import gpu_prices, report_settings

PROG = "python -m sizing"
FORMATS = {".html": "html", ".htm": "html", ".md": "markdown", ".markdown": "markdown", ".json": "json"}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
    return value


def _non_negative(text: str) -> float:
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a number ≥ 0, got {text!r}")
    return value


def _positive(text: str) -> float:
    value = _non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    value = _positive(text)
    if value != int(value):
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}")
    return int(value)


def _host_tdp(text: str) -> tuple[str, float]:
    host, sep, watts = text.rpartition("=")
    if not sep or not host:
        raise argparse.ArgumentTypeError(f"expected HOST=W or CPU_MODEL=W, got {text!r}")
    return host, _positive(watts)


def _priced(text: str) -> tuple[str | None, float]:
    """USD (every GPU) or MODEL=USD."""
    key, sep, usd = text.rpartition("=")
    if sep and not key.strip():
        raise argparse.ArgumentTypeError(f"expected USD or MODEL=USD, got {text!r}")
    return (key.strip() or None), _non_negative(usd if sep else text)


def _host_price(text: str) -> tuple[str, float]:
    host, sep, usd = text.rpartition("=")
    if not sep or not host.strip():
        raise argparse.ArgumentTypeError(f"expected HOST=USD or CPU_MODEL=USD, got {text!r}")
    return host.strip(), _non_negative(usd)


def _share(text: str, parse: Callable[[str], float]) -> float:
    """A fraction as given ("0.5") or as a percentage ("50%"), its number read by `parse`."""
    body = text.strip()
    return parse(body[:-1].strip()) / 100.0 if body.endswith("%") else parse(body)


def _utilisation(text: str) -> float:
    value = _share(text, _positive)
    if value > 1:
        raise argparse.ArgumentTypeError(f"must be a fraction > 0 and ≤ 1 (or a percentage), got {text!r}")
    return value


def _fraction(text: str) -> float:
    value = _share(text, _non_negative)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"must be below 1 (or 100%), got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Write the sizing decision report (is the GPU worth it?).")
    p.add_argument(
        "runs", nargs="+", metavar="RUN",
        help="run id under DATA_DIR, a run directory, or a folder of runs (e.g. data: every run in it)",
    )  # fmt: skip
    p.add_argument("--out", required=True, type=Path, help="report.md, report.html or report.json")
    p.add_argument("--data-dir", type=Path, default=Path("data"), help="default: data")
    p.add_argument(
        "--tariff", type=_non_negative, default=0.15, help="electricity, USD per kWh (default 0.15)"
    )
    p.add_argument("--gpu-price", type=_priced, action="append", default=[], metavar="[MODEL=]USD",
                   help="price of each GPU (USD), or of each GPU of one model (MODEL=USD); repeatable "
                   "(default: no price given)")  # fmt: skip
    p.add_argument("--cpu-price", type=_non_negative, help="price of every host without GPUs, USD")
    p.add_argument("--host-price", type=_host_price, action="append", default=[], metavar="HOST=USD",
                   help="price of one host without GPUs (host name or CPU model); repeatable")  # fmt: skip
    p.add_argument("--amortise-years", type=_positive, default=3.0, help="hardware life in years (default 3)")
    p.add_argument("--utilisation", type=_utilisation, default=DEFAULT_UTILISATION, metavar="FRACTION",
                   help="how busy the hardware will be over its life, > 0 and ≤ 1 (or 50%%) "
                   f"(default {DEFAULT_UTILISATION:g}: round the clock)")  # fmt: skip
    p.add_argument(
        "--value-per-hour", type=_non_negative, help="what an hour of training time saved is worth"
    )
    p.add_argument(
        "--cpu-tdp-w", type=_positive, help="CPU TDP of every host for an energy ESTIMATE without RAPL"
    )
    p.add_argument("--cpu-tdp", type=_host_tdp, action="append", default=[], metavar="HOST=W",
                   help="CPU TDP of one host (host name or CPU model); repeatable")  # fmt: skip
    p.add_argument("--idle-fraction", type=_fraction, default=0.3,
                   help="idle floor of the estimate (default 0.3, or 30%%)")  # fmt: skip
    p.add_argument("--temp-threshold", type=_finite, default=80.0, help="°C (default 80)")
    p.add_argument("--target-steps", type=_positive_int, default=DEFAULT_TARGET_STEPS, help="default 1000")
    p.add_argument("--target-loss", type=_positive, help="default: the lowest loss every run reached")
    p.add_argument("--baseline", help="run to compare against (default: a CPU run of the GPU runs' workload)")
    p.add_argument("--include-incomplete", action="store_true",
                   help="average failed or interrupted runs in as repeats (default: apart)")  # fmt: skip
    return p


def settings_from(args: argparse.Namespace, baseline: str | None) -> ReportSettings:
    every_gpu, per_model = gpu_prices(args.gpu_price)
    return report_settings(
        tariff=args.tariff, gpu_price=every_gpu, gpu_prices_by_model=per_model, cpu_price=args.cpu_price,
        host_prices=args.host_price, amortise_years=args.amortise_years, utilisation=args.utilisation,
        value_per_hour=args.value_per_hour, cpu_tdp_w=args.cpu_tdp_w, cpu_tdp_by_host=args.cpu_tdp,
        idle_fraction=args.idle_fraction, temp_threshold=args.temp_threshold, target_steps=args.target_steps,
        target_loss=args.target_loss, baseline=baseline, include_incomplete=args.include_incomplete,
    )  # fmt: skip


def output_format(path: Path) -> str:
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        raise UsageError(f"--out must end in .html, .md or .json, got {str(path)!r}")
    return kind


def write_text_atomic(path: Path, text: str) -> None:
    if not path.parent.is_dir():
        raise UsageError(f"--out: directory {str(path.parent)!r} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:  # read-only, not ours, not a real file system
        raise UsageError(f"--out: cannot write in {str(path.parent)!r} ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:  # the disk filled, or the name is a directory: the old report stays as it was
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise UsageError(f"--out: cannot write {str(path)!r} ({exc.strerror or exc})") from None
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def resolve_baseline(spec: str | None, runs: Sequence[RunData]) -> str | None:
    """--baseline as a run id of the report: given as an id or as one of the RUN paths."""
    if spec is None:
        return None
    ids = {r.run_id for r in runs}
    for candidate in (spec, Path(spec).name):
        if candidate in ids:
            return candidate
    path = "/" + Path(spec).resolve().as_posix().strip("/")
    named_by_path = [run_id for run_id in ids if path.endswith("/" + run_id)]  # load.named_apart's names
    if len(named_by_path) == 1:
        return named_by_path[0]
    raise UsageError(f"--baseline {spec!r} is not one of the runs in the report")


def main(argv: Sequence[str], prog: str = PROG) -> int:
    """0 on success, 2 on bad input (one line on stderr)."""
    try:
        args = build_parser().parse_args(list(argv))
        kind = output_format(args.out)
        runs = load_runs(args.data_dir, args.runs)
        report = build_report(runs, settings_from(args, resolve_baseline(args.baseline, runs)))
        renderer = {"html": render_html, "markdown": render_markdown, "json": render_json}[kind]
        write_text_atomic(args.out, renderer(report))
    except UsageError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.out} ({len(report.runs)} run(s), {kind})")
    return 0
