"""How numbers read in the report: unknown is a word ("n/a", "not measured", "no price given"), never 0."""

from __future__ import annotations

import math

from runformat import format_duration
from sizing.analysis.stats import Spread

NOT_MEASURED = "not measured"
NO_PRICE = "no price given"
ESTIMATE = "ESTIMATE"


def fmt(value: float | None, digits: int = 2, unit: str = "", unknown: str = "n/a") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return unknown
    if math.isinf(value):
        return "never"
    return f"{value:,.{digits}f}{unit}"


def fmt_usd(value: float | None, unknown: str = NO_PRICE) -> str:
    if value is None:
        return unknown
    if abs(value) >= 1:
        return f"${value:,.2f}"
    # two significant figures however small (a known $0.000047 is never printed as $0.0000)
    places = 4 if value == 0 else max(4, 1 - math.floor(math.log10(abs(value))))
    return f"${value:,.{places}f}"


def fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds:,.0f} s ({format_duration(seconds)})"


def fmt_spread(spread: Spread, digits: int = 2, unknown: str = "n/a") -> str:
    if spread.mean is None:
        return unknown
    if spread.count < 2:
        return fmt(spread.mean, digits)
    return (
        f"{fmt(spread.mean, digits)} ± {fmt(spread.std, digits)} "
        f"({fmt(spread.minimum, digits)}–{fmt(spread.maximum, digits)}, n={spread.count})"
    )


def steps_only_rate(examples_per_s: float | None, steps_per_s: float | None) -> str | None:
    """'420.563 steps/s, examples per step not known (--batch gives them)' for a job that counts steps but
    not examples; None where examples/s is known or nothing was counted."""
    if examples_per_s is not None or not steps_per_s:
        return None
    return f"{fmt(steps_per_s, 3)} steps/s, examples per step not known (--batch gives them)"


def marked(text: str, is_estimate: bool) -> str:
    """The figure with ESTIMATE beside it when an estimated number went into it."""
    unknown = text.startswith("n/a") or text in (NOT_MEASURED, NO_PRICE)
    return f"{text} ({ESTIMATE})" if is_estimate and not unknown else text
