"""training.csv rebuilt from a step counter a Prometheus server scraped: the workbench's own
`workbench_training_step` (from `collect --prometheus`), or the fleet job's own step metric.

One row per scrape at which the step moved on, stamped with the scrape's time (so a step's time is known
to within one scrape interval); `step_time_s` is the mean over the steps since the previous row. Losses
and learning rate are not in Prometheus: those cells stay empty.
"""

from __future__ import annotations

from collect.importers.promapi import Series

TRAINING_COLUMNS = [
    "time_unix",
    "elapsed_s",
    "step",
    "loss_total",
    "learning_rate",
    "step_time_s",
    "examples_per_s",
]


def busiest(series: list[Series]) -> Series | None:
    """The series with the most samples (one job's step counter), or None."""
    return max(series, key=lambda item: len(item.times), default=None)


def training_rows(
    steps: Series, examples: Series | None, start: float, end: float, lookback_s: float
) -> list[dict[str, float | int | None]]:
    rows: list[dict[str, float | int | None]] = []
    previous: tuple[float, int] | None = None
    for when, value in zip(steps.times, steps.values, strict=True):
        if not start <= when <= end:
            continue
        step = int(value)
        if previous is not None and step <= previous[1]:
            if step < previous[1]:
                previous = (when, step)  # the job restarted its count: start over from here
            continue
        step_time = None if previous is None else round((when - previous[0]) / (step - previous[1]), 6)
        rate = None if examples is None else examples.value_at(when, lookback_s)
        rows.append(
            {
                "time_unix": round(when, 6),
                "elapsed_s": round(when - start, 6),
                "step": step,
                "loss_total": None,
                "learning_rate": None,
                "step_time_s": step_time,
                "examples_per_s": None if rate is None else round(rate, 4),
            }
        )
        previous = (when, step)
    return rows
