"""Is one run a valid measurement? Whether it finished, and whether its steady rate holds up (resumed
sessions, training.json's own figure, drift within the run, a within-run interval)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from runformat.bursts import bursts_hint, bursts_text, worth_saying
from runformat.columns import core_indices
from runformat.diskfull import DISK_FULL
from runformat.progress import LOSS_NOT_FINITE_FROM_STEP
from sizing.analysis import coverage
from sizing.analysis.jobcheck import is_job
from sizing.analysis.sessions import DRIFT_WARN_FRACTION
from sizing.analysis.signature import device_kind
from sizing.analysis.stats import ratio_ci95, spread
from sizing.analysis.throughput import (
    FROM_STEP_LOG,
    LOSS_WINDOW_STEPS,
    Throughput,
    counted_batch,
    logged_batch,
)
from sizing.model import number

INCOMPLETE_TRAINING = {
    "failed": "training failed",
    "interrupted": "training interrupted",
    "ended unrecorded": "training ended without its last word (killed)",
    "running": "training still running (or killed) when read",
}
INCOMPLETE_RUN = {
    "failed": "the command failed",
    "interrupted": "the collector was interrupted",
    "running": "the collector did not finish",
}
AFTER_TRAINING = ("export", "evaluate", "detect", "infer")  # the phases a training run goes on to
RATE_MISMATCH_FRACTION = 0.05
LOSS_ROSE_FACTOR = 1.25  # the last loss reads' mean above this × the first's: the training may have diverged
MIN_VERDICT_SAMPLES = 5  # telemetry samples in the measurement window below which its verdict is a guess
RECORDS_SLACK_S = 60.0  # the training starts after its collector, and inside it: this much clock skew aside
BATCH_DOUBT_SHARE = 0.1  # the step log's examples a step this share or more off training.json's batch_size


def few_samples(count: int) -> str | None:
    """'its verdict rests on 2 telemetry samples …' when the measurement window holds some samples but fewer
    than MIN_VERDICT_SAMPLES; None otherwise (none at all is said where the host was not recorded)."""
    if not 0 < count < MIN_VERDICT_SAMPLES:
        return None
    return (f"its verdict rests on {count} telemetry sample{'s' * (count != 1)} in the measurement window, "
            f"fewer than {MIN_VERDICT_SAMPLES}: what limited it is a guess")  # fmt: skip


def telemetry_gaps(
    times: np.ndarray, window: tuple[float, float] | None, interval_s: float | None
) -> str | None:
    """'telemetry covers 62% of its measurement window …' when its samples cover less than
    coverage.COMPLETE_COVERAGE of the window (two samples cover the time between them when they are at most
    coverage.MAX_GAP_INTERVALS sampling intervals apart, as for energy: coverage.gap_limits); None otherwise,
    and with too few samples to tell (few_samples says that)."""
    if window is None or window[1] <= window[0]:
        return None
    inside = np.sort(times[np.isfinite(times) & (times >= window[0]) & (times <= window[1])])
    if inside.size < MIN_VERDICT_SAMPLES:
        return None
    edged = np.concatenate(([window[0]], inside, [window[1]]))
    steps = np.diff(edged)
    limits = coverage.gap_limits(edged, coverage.max_gap_s(inside, interval_s))
    share = float(steps[steps <= limits].sum()) / (window[1] - window[0])
    if share >= coverage.COMPLETE_COVERAGE:
        return None
    return (f"telemetry covers {share:.0%} of its measurement window (a gap of up to {steps.max():,.0f} s: "
            "the collector paused, or rows were lost): its verdict reads the rest")  # fmt: skip


def telemetry_short(steady: tuple[float, float] | None, recorded: tuple[float, float] | None) -> str | None:
    """'telemetry covers 40% of its steady state (none in its first 180 s): …' where the telemetry's own
    span (`recorded`: the steady state clipped to it) leaves out more of the steady state within the
    training than coverage.COMPLETE_COVERAGE allows (a file cut at its head or tail); None otherwise."""
    if steady is None or recorded is None or steady[1] <= steady[0]:
        return None
    share = (recorded[1] - recorded[0]) / (steady[1] - steady[0])
    if share >= coverage.COMPLETE_COVERAGE:
        return None
    gaps = (("first", recorded[0] - steady[0]), ("last", steady[1] - recorded[1]))
    missing = [f"none in its {side} {gap:,.0f} s" for side, gap in gaps if gap >= 1]
    return (f"telemetry covers {share:.0%} of its steady state ({', '.join(missing)}): its verdict and "
            "energy read that part")  # fmt: skip


def step_log_cut(training: pd.DataFrame, training_info: dict) -> str | None:
    """'training.csv holds steps 5,231–8,718 of the 8,718 training.json records: …' where the step log's
    steps span less than coverage.COMPLETE_COVERAGE of the steps training.json counts (a file cut at its
    head or tail); None otherwise, and where training.json counts none."""
    counted = number(training_info.get("steps"))
    if not counted or counted <= 0 or "step" not in training:
        return None
    steps = pd.to_numeric(training["step"], errors="coerce").dropna()
    if steps.empty or (steps.max() - steps.min() + 1) / counted >= coverage.COMPLETE_COVERAGE:
        return None
    return (f"training.csv holds steps {steps.min():,.0f}–{steps.max():,.0f} of the {counted:,.0f} "
            "training.json records (a file cut at its head or tail?): its rate is that part's")  # fmt: skip


def foreign_run_json(meta: dict, training_info: dict) -> str | None:
    """'its run.json and training.json are not one run's (…)' where run.json cannot describe the training
    training.json records: the training began before run.json's start or after its end (beyond
    RECORDS_SLACK_S), or the two ask for different devices (one copied from another run); None otherwise."""
    found = []
    started, ended = number(meta.get("start_unix")), number(meta.get("end_unix"))
    began = number(training_info.get("start_unix"))
    if began is not None and started is not None and began < started - RECORDS_SLACK_S:
        found.append(f"the training began {started - began:,.0f} s before its start")
    elif began is not None and ended is not None and began > ended + RECORDS_SLACK_S:
        found.append(f"the training began {began - ended:,.0f} s after its end")
    devices = (meta.get("device"), training_info.get("device_requested"))
    if all(isinstance(d, str) and d.strip() for d in devices):
        asked = [device_kind({"device": d}, {}) for d in devices]  # as the report reads each ('cuda:0' a GPU)
        if asked[0] != asked[1]:
            found.append(f"it says device {devices[0]}, training.json asked for {devices[1]}")
    if not found:
        return None
    return (
        f"its run.json and training.json are not one run's ({'; '.join(found)}): one copied from "
        "another run? The hardware, workload and settings they name may not be this run's"
    )


def batch_in_doubt(
    training: pd.DataFrame, training_info: dict, devices: int = 1
) -> tuple[float | None, str | None, bool]:
    """The examples a step the step log's `examples` column counts, where that count is BATCH_DOUBT_SHARE or
    more off training.json's batch_size; what to say; and whether it is a caveat. A count that is one of
    `devices` data-parallel devices' share of the batch size (a job counting on its first rank) leaves the
    batch size as recorded, said (None, note, False); any other count is read for it (a job's --batch given
    as its per-device batch, a record edited): (count, caveat, True). (None, None, False) when they agree.
    Our training's record without a batch_size (lost, text) reads its step log's (logged_batch), said
    (batch, note, False); a job's stays undeclared (two jobs compare on what both declared)."""
    stated, counted = number(training_info.get("batch_size")), counted_batch(training)
    if stated is None and not is_job(training_info) and (logged := logged_batch(training)):
        return (
            logged,
            f"no batch_size recorded (training.json): read as its step log's {logged:,.0f} examples a step",
            False,
        )
    if stated is None or stated <= 0 or not counted or abs(counted - stated) < BATCH_DOUBT_SHARE * stated:
        return None, None, False
    if devices > 1 and abs(counted * devices - stated) < BATCH_DOUBT_SHARE * stated:
        return (
            None,
            (
                f"its step log counts {counted:,.0f} examples a step, one of {devices} devices' share of "
                f"training.json's batch_size {stated:,.0f}: the batch size read as recorded"
            ),
            False,
        )
    return (
        counted,
        (
            f"training.json's batch_size is {stated:,.0f} but its step log counts {counted:,.0f} examples a "
            "step: its examples/s and workload read the step log's count (a per-device batch given for the "
            "global one, or the other way?)"
        ),
        True,
    )


CPU_FACTS_DOUBT = "run.json's CPU facts may be another host's (its CPU count is not the telemetry's)"


def cpus_disagree(meta: dict, telemetry: pd.DataFrame) -> tuple[int | None, str | None]:
    """The logical CPUs the telemetry sampled (`cpu<N>_util_pct` columns with a reading) where run.json's
    system records another count (a run.json from another host, an edited one), and the caveat; else
    (None, None). The telemetry is the measurement."""
    system = meta.get("system") if isinstance(meta.get("system"), dict) else {}
    stated = number(system.get("cpu_cores_logical"))
    read = [i for i in core_indices(telemetry.columns) if telemetry[f"cpu{i}_util_pct"].notna().any()]
    if stated is None or not read or len(read) == stated:
        return None, None
    return len(read), (
        f"run.json records {stated:,.0f} logical CPUs but its telemetry samples {len(read)} (cpu{read[0]}–"
        f"cpu{read[-1]}): sized with the {len(read)} sampled (a run.json from another host?)"
    )


def incomplete_reason(meta: dict, training_info: dict, phases: pd.DataFrame | None = None) -> str | None:
    """Why the run is not a complete measurement (training.json status, else run.json end_reason), or
    None. A run that records neither (another tool's) is taken as complete, and so is one without a
    training status whose phases.csv says its training ended ok before a later phase failed
    (trained_first). A full disk (either file's `failure`) is named as such, whoever noticed it first."""
    for failure in (meta.get("failure"), training_info.get("failure")):
        if isinstance(failure, dict) and failure.get("reason") == DISK_FULL:
            path = failure.get("path")
            return "run failed: the disk filled up" + (f" ({path} could not be written)" if path else "")
    status = training_info.get("status")
    if isinstance(status, str) and status in INCOMPLETE_TRAINING:
        error = training_info.get("error")
        return INCOMPLETE_TRAINING[status] + (f": {error}" if isinstance(error, str) and error else "")
    diverged = number(training_info.get(LOSS_NOT_FINITE_FROM_STEP))
    if diverged is not None:
        return f"training diverged: its loss was not finite (nan or inf) from step {diverged:.0f} to the end"
    end = meta.get("end_reason")
    if isinstance(end, str) and end in INCOMPLETE_RUN and status not in ("completed", "deadline"):
        if status is None and end == "failed" and trained_first(phases):
            return None
        code = number(meta.get("exit_code"))
        return INCOMPLETE_RUN[end] + (f" (exit code {code:g})" if code is not None else "")
    return None


def trained_first(phases: pd.DataFrame | None) -> bool:
    """phases.csv records a train phase that ended ok, and the phases that failed came after training
    (export, evaluate, detect, infer): the training is whole, whatever failed next."""
    if phases is None or phases.empty or not {"phase", "status"} <= set(phases.columns):
        return False
    rows = phases[["phase", "status"]].astype(str)
    trained = ((rows["phase"] == "train") & (rows["status"] == "ok")).any()
    failed = set(rows.loc[rows["status"] != "ok", "phase"])
    return bool(trained) and failed <= set(AFTER_TRAINING)


def loss_rose(training: pd.DataFrame) -> str | None:
    """'its loss rose: …' when the mean of the last loss reads is more than LOSS_ROSE_FACTOR × the mean of
    the first (each the larger of LOSS_WINDOW_STEPS and a tenth of the reads); None otherwise, and for a
    loss that is ever ≤ 0 (no ratio compares it) or too few reads."""
    if "loss_total" not in training:
        return None
    losses = pd.to_numeric(training["loss_total"], errors="coerce").to_numpy(dtype=float)
    losses = losses[np.isfinite(losses)]
    window = max(LOSS_WINDOW_STEPS, losses.size // 10)
    if losses.size < 2 * window or (losses <= 0).any():
        return None
    first, last = float(losses[:window].mean()), float(losses[-window:].mean())
    if last <= LOSS_ROSE_FACTOR * first:
        return None
    return (
        f"its loss rose: the last {window:,} loss reads average {last:.3g}, more than {LOSS_ROSE_FACTOR:g}× "
        f"the first {window:,}'s {first:.3g}: the training may have diverged, so its rate may not be one of "
        "learning"
    )


def rate_problems(run_id: str, rate: Throughput, training_info: dict) -> list[str]:
    """Warnings about the steady rate: sessions, training.json's own rate, drift within the run."""
    found = []
    if worth_saying(rate.bursts) or rate.not_timed:
        measured = (
            "the rate is read between the bursts' last rows (the last burst left out)"
            if rate.steps_per_s
            else "too few bursts to time its steps: rate unknown"
        )
        hint = bursts_hint((training_info.get("progress") or {}).get("from"))
        found.append(f"{run_id}: training.csv's rows {bursts_text(rate.bursts)}; {measured}; {hint}")
    if rate.sessions > 1:
        found.append(
            f"{run_id}: training.csv holds {rate.sessions} training sessions (a resumed run, or a pause: the "
            "process stopped or the machine slept); the steady rate counts each session after its warm-up, "
            f"leaving out {rate.session_gaps_s:,.0f} s between them"
        )
    own = number(training_info.get("steady_steps_per_s"))
    apart = rate_mismatch(rate, training_info)
    if apart is not None and apart > RATE_MISMATCH_FRACTION:
        found.append(
            f"{run_id}: steady rate from training.csv {rate.steps_per_s:.3f} steps/s differs from "
            f"training.json's steady_steps_per_s {own:.3f} by {apart:.0%} (> {RATE_MISMATCH_FRACTION:.0%})"
        )
    few = too_few_steps(rate)
    if few:
        found.append(f"{run_id}: steady rate {few}")
    if rate.pauses is not None and rate.pauses.said():
        found.append(f"{run_id}: steady rate holds {rate.pauses.describe()}")
    drift = rate.drift_fraction
    if drift is not None and abs(drift) > DRIFT_WARN_FRACTION:
        found.append(
            f"{run_id}: not stationary: steps/s {rate.first_third_steps_per_s:.3f} in the first third of the "
            f"steady window, {rate.last_third_steps_per_s:.3f} in the last ({drift:+.0%})"
        )
    return found


def too_few_steps(rate: Throughput) -> str | None:
    """'rests on 4 steps (0.2 s): too few for a within-run interval' where the step log's steady rate has
    too few rows for the batch means that bound it; None otherwise."""
    if rate.source != FROM_STEP_LOG or not rate.steps_per_s or rate.steps_per_s_ci95 is not None:
        return None
    count = rate.steady_steps
    if count is None:
        return "rests on too few steps for a within-run interval"
    seconds = count / rate.steps_per_s
    spent = f"{seconds:.2f}" if seconds < 1 else f"{seconds:,.1f}"
    return f"rests on {count:,} step{'s' * (count != 1)} ({spent} s): too few for a within-run interval"


def rate_mismatch(rate: Throughput, training_info: dict) -> float | None:
    """|step-log rate − training.json's steady_steps_per_s| / the latter, when both are known."""
    own = number(training_info.get("steady_steps_per_s"))
    if rate.source != FROM_STEP_LOG or rate.steps_per_s is None or not own or own <= 0:
        return None
    return abs(rate.steps_per_s - own) / own


def within_run_speedup_ci95(
    runs: Sequence[Throughput], bases: Sequence[Throughput], in_steps: bool = False
) -> tuple[float, float] | None:
    """With one run on each side: the speedup's 95 % interval from each run's batch means of examples/s
    (of steps/s `in_steps`: a job that counts steps only); it says how well each run pins its own rate,
    not how much repeats would vary."""
    if len(runs) != 1 or len(bases) != 1:
        return None
    run, base = runs[0], bases[0]
    run_per_step, base_per_step = (1.0, 1.0) if in_steps else (run.batch_size, base.batch_size)
    if not (run.batch_steps_per_s and base.batch_steps_per_s and run_per_step and base_per_step):
        return None
    run_spread = spread(r * run_per_step for r in run.batch_steps_per_s)
    base_spread = spread(r * base_per_step for r in base.batch_steps_per_s)
    return ratio_ci95(run_spread, base_spread)
