"""A job's step log whose rows came in bursts.

A job that writes its progress through a buffer (block-buffered output to a pipe: a container's Python, a
compiled program, a logger of its own) hands the collector many lines in one write, and progress-protocol
lines without their own time are stamped when the collector reads the file; so those rows carry the time
the block came, not the time each step ended. Only the last row of each burst is timed: the steps before
it were done by then. A rate read from the rows within a burst is the reader's speed, not the training's.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

BURST_GAP_S = 0.001  # rows less than this apart came in one write (no step and its print take so little)
BURST_ROW_SHARE = 0.5  # a step log is bursty when at least this share of its row gaps are within bursts…
BURST_TIME_SHARE = 0.1  # …and those gaps add up to less than this share of its span (tiny steps do not)
MANY_BURSTS = 100  # from this many, a burst's lag is about 1 % of the span or less: timed closely enough
MERGE_SHARE = 0.1  # bursts closer than this share of the mean gap between bursts: one write, read in parts
UNBUFFERED_HINT = (
    "run the job with its output unbuffered (python -u, PYTHONUNBUFFERED=1 in its container, stdbuf -oL)"
)
TIME_UNIX_HINT = "give each progress line its own time_unix (time.time() when its step ended)"


def burst_ends(times: Sequence[float], start: float | None = None) -> list[int] | None:
    """The index of each burst's last row, in order, when the rows (in time order) came in bursts; None
    when they did not (each row then is timed). `start`: when the training began (its span then counts
    from there, so that a log written in one burst at the end is one)."""
    gaps = [later - earlier for earlier, later in pairwise(times)]
    if not gaps:
        return None
    within = [gap for gap in gaps if gap < BURST_GAP_S]
    span = times[-1] - (start if start is not None and start <= times[0] else times[0])
    if len(within) < BURST_ROW_SHARE * len(gaps) or span <= 0 or sum(within) >= BURST_TIME_SHARE * span:
        return None
    between = [gap for gap in gaps if gap >= BURST_GAP_S] + ([times[0] - start] if start is not None else [])
    apart = max(BURST_GAP_S, MERGE_SHARE * sum(between) / len(between)) if between else BURST_GAP_S
    return [index for index, gap in enumerate(gaps) if gap >= apart] + [len(times) - 1]


def bursts_text(count: int) -> str:
    """'came in 3 bursts (…)', for a warning's middle."""
    return (
        f"came in {count} burst{'s' * (count != 1)} (rows under {BURST_GAP_S * 1000:g} ms apart, then a gap: "
        "lines written or read a block at a time, so a row's time is when its block came, not when its step "
        "ended)"
    )


def worth_saying(count: int) -> bool:
    """Whether a log's bursts blur its rate enough to say so (fewer than MANY_BURSTS)."""
    return 0 < count < MANY_BURSTS


def bursts_hint(progress_from: object) -> str:
    """How a job's steps get a time each: its own time_unix (progress protocol), else unbuffered output."""
    return TIME_UNIX_HINT if progress_from == "protocol" else UNBUFFERED_HINT
