"""`python -m sizing RUN... --out report.md|report.html|report.json [options]`: the sizing report.

RUN is a run id under DATA_DIR/runs or DATA_DIR/examples, or the path of a run directory. Bad input
prints one line on stderr and exits 2.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from sizing.context import DEFAULT_TARGET_STEPS, ReportSettings
from sizing.load import load_runs
from sizing.model import DEFAULT_UTILISATION, Prices, RunData, Thresholds, UsageError
from sizing.render import render_html, render_json, render_markdown
from sizing.report import build_report

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


def _utilisation(text: str) -> float:
    value = _positive(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"must be a fraction > 0 and ≤ 1, got {text!r}")
    return value


def gpu_prices(
    given: Sequence[tuple[str | None, float]],
) -> tuple[float | None, tuple[tuple[str, float], ...]]:
    """--gpu-price values: the one for every GPU (plain USD, at most once) and those per model."""
    plain = [usd for model, usd in given if model is None]
    if len(plain) > 1:
        raise UsageError("--gpu-price USD (every GPU) given more than once; use MODEL=USD per model")
    return (plain[0] if plain else None), tuple((m, usd) for m, usd in given if m is not None)


def _fraction(text: str) -> float:
    value = _non_negative(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"must be below 1, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Write the sizing decision report (is the GPU worth it?).")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run id under DATA_DIR, or a run directory")
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
                   help="how busy the hardware will be over its life, > 0 and ≤ 1 "
                   f"(default {DEFAULT_UTILISATION:g}: round the clock)")  # fmt: skip
    p.add_argument(
        "--value-per-hour", type=_non_negative, help="what an hour of training time saved is worth"
    )
    p.add_argument(
        "--cpu-tdp-w", type=_positive, help="CPU TDP of every host for an energy ESTIMATE without RAPL"
    )
    p.add_argument("--cpu-tdp", type=_host_tdp, action="append", default=[], metavar="HOST=W",
                   help="CPU TDP of one host (host name or CPU model); repeatable")  # fmt: skip
    p.add_argument(
        "--idle-fraction", type=_fraction, default=0.3, help="idle floor of the estimate (default 0.3)"
    )
    p.add_argument("--temp-threshold", type=_finite, default=80.0, help="°C (default 80)")
    p.add_argument("--target-steps", type=_positive_int, default=DEFAULT_TARGET_STEPS, help="default 1000")
    p.add_argument("--target-loss", type=_positive, help="default: the lowest loss every run reached")
    p.add_argument("--baseline", help="run to compare against (default: a CPU run of the GPU runs' workload)")
    p.add_argument("--include-incomplete", action="store_true",
                   help="average failed or interrupted runs in as repeats (default: apart)")  # fmt: skip
    return p


def settings_from(args: argparse.Namespace, baseline: str | None) -> ReportSettings:
    every_gpu, per_model = gpu_prices(args.gpu_price)
    prices = Prices(
        tariff_per_kwh=args.tariff,
        gpu_price=every_gpu,
        cpu_price=args.cpu_price,
        amortise_years=args.amortise_years,
        value_per_hour=args.value_per_hour,
        cpu_tdp_w=args.cpu_tdp_w,
        cpu_tdp_by_host=tuple(args.cpu_tdp),
        idle_fraction=args.idle_fraction,
        gpu_price_by_model=per_model,
        host_price_by_host=tuple(args.host_price),
        utilisation=args.utilisation,
    )
    return ReportSettings(prices, Thresholds(temp_threshold_c=args.temp_threshold), args.target_steps,
                          args.target_loss, baseline, args.include_incomplete)  # fmt: skip


def settings_from_values(
    *,
    tariff: float | None,
    gpu_price: float | None = None,
    cpu_price: float | None = None,
    amortise_years: float | None = None,
    value_per_hour: float | None = None,
    cpu_tdp_w: float | None = None,
    idle_fraction: float | None = None,
    utilisation: float | None = None,
    gpu_prices_by_model: str | None = None,
    host_prices: str | None = None,
    temp_threshold: float | None = None,
    target_steps: float | None = None,
    target_loss: float | None = None,
) -> ReportSettings:
    """Settings from form values (None = not given, defaults where there is one); UsageError if invalid."""
    years = _optional_float("amortisation years", amortise_years)
    idle = _optional_float("idle fraction", idle_fraction)
    busy = _optional_float("utilisation", utilisation)
    prices = Prices(
        tariff_per_kwh=_optional_float("tariff", tariff),
        gpu_price=_optional_float("GPU price", gpu_price),
        cpu_price=_optional_float("CPU price", cpu_price),
        amortise_years=Prices.amortise_years if years is None else years,
        value_per_hour=_optional_float("value per hour", value_per_hour),
        cpu_tdp_w=_optional_float("CPU TDP", cpu_tdp_w),
        idle_fraction=Prices.idle_fraction if idle is None else idle,
        utilisation=DEFAULT_UTILISATION if busy is None else busy,
        gpu_price_by_model=_price_list("GPU prices per model", gpu_prices_by_model),
        host_price_by_host=_price_list("host prices", host_prices),
    )
    problems = prices.problems()
    if problems:
        raise UsageError(problems[0])
    temp = _optional_float("temperature threshold", temp_threshold)
    temp = Thresholds.temp_threshold_c if temp is None else temp
    if not math.isfinite(temp):
        raise UsageError(f"temperature threshold must be a finite number, got {temp_threshold!r}")
    steps = _optional_float("target steps", target_steps)
    steps = DEFAULT_TARGET_STEPS if steps is None else steps
    if not math.isfinite(steps) or steps < 1 or steps != int(steps):
        raise UsageError(f"target steps must be a whole number ≥ 1, got {target_steps!r}")
    loss = _optional_float("target loss", target_loss)
    if loss is not None and not (math.isfinite(loss) and loss > 0):
        raise UsageError(f"target loss must be a number > 0, got {target_loss!r}")
    return ReportSettings(prices, Thresholds(temp_threshold_c=temp), int(steps), loss, None)


def _price_list(name: str, text: object) -> tuple[tuple[str, float], ...]:
    """'A100=9000, H100=25000' (a form's text field) as (key, USD) pairs."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return ()
    found = []
    for item in str(text).replace(";", ",").split(","):
        if not item.strip():
            continue
        key, sep, usd = item.rpartition("=")
        value = _optional_float(f"{name} ({item.strip()!r})", usd) if sep and key.strip() else None
        if value is None:
            raise UsageError(f"{name}: expected NAME=USD, got {item.strip()!r}")
        found.append((key.strip(), value))
    return tuple(found)


def _optional_float(name: str, value: object) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise UsageError(f"{name} must be a number, got {value!r}")
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise UsageError(f"{name} must be a number, got {value!r}") from None


def output_format(path: Path) -> str:
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        raise UsageError(f"--out must end in .html, .md or .json, got {str(path)!r}")
    return kind


def write_text_atomic(path: Path, text: str) -> None:
    if not path.parent.is_dir():
        raise UsageError(f"--out: directory {str(path.parent)!r} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
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
