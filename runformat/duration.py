"""Durations as people type them: `90s`, `75m`, `2h`, `1h30m`, `10ms`, or plain seconds."""

from __future__ import annotations

import math
import re

MIN_INTERVAL_S = 0.01  # the one lower bound of a sampling interval, wherever it is given
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_PLAIN = re.compile(r"\d+(?:\.\d+)?")


def parse_duration(text: str, *, minimum_s: float = 0.0, what: str = "duration") -> float:
    """Seconds in `text`; ValueError with a one-line, user-facing message, naming it `what`, if it is not
    a duration > 0.

    Units may be combined in descending order (`1h30m`, `2m30s`); a bare number means seconds.
    """
    raw = text.strip().lower() if isinstance(text, str) else ""
    if not raw:
        raise ValueError(f"empty {what}: use e.g. 90s, 75m, 2h, 1h30m or 100ms")
    seconds = float(raw) if _PLAIN.fullmatch(raw) else _parse_units(raw, text, what)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{what} must be greater than zero, got {text!r}")
    if seconds < minimum_s:
        raise ValueError(f"{what} {text!r} is below the minimum of {format_duration(minimum_s)}")
    return seconds


def parse_interval(text: str) -> float:
    """A sampling interval ('1s', '100ms'): ValueError, one line, below MIN_INTERVAL_S or malformed."""
    return parse_duration(text, minimum_s=MIN_INTERVAL_S, what="interval")


def _parse_units(raw: str, original: str, what: str) -> float:
    position, total, last_rank = 0, 0.0, -1
    ranks = ["h", "m", "s", "ms"]
    for match in _PART.finditer(raw):
        if match.start() != position:
            break
        rank = ranks.index(match.group(2))
        if rank <= last_rank:
            raise ValueError(f"bad {what} {original!r}: units must go from larger to smaller (e.g. 1h30m)")
        last_rank = rank
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if position != len(raw) or position == 0:
        raise ValueError(f"bad {what} {original!r}: use e.g. 90s, 75m, 2h, 1h30m or 100ms")
    return total


def format_duration(seconds: float) -> str:
    """Compact human form: 0.25 -> '250ms', 90 -> '1m30s', 4500 -> '1h15m'."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "", f"{secs}s" if secs else ""]
    return "".join(parts) or "0s"
