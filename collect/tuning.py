"""The `--tune` search and judge, as pure functions over settings and trial run directories.

docs/tuning.md states the rules; every threshold here is pinned by tests/collect/test_tuning.py. The
sweep that runs the trials is collect/tune_sweep.py.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from runformat import TRAINING_CSV, read_run
from runformat.progress import step_rows
from runformat.tuning import FAILED, HARMED, OK, TOO_SHORT, Setting, TrialOutcome

TRIAL_STEADY_S = 20.0  # a trial's steady rate is measured over at least this long
MIN_GAIN = 0.05  # the search moves only to a setting this much faster in examples/s than the best so far
LOSS_HARM_RATIO = 1.25  # a trial's late mean loss above this × the reference's over the same steps: harmed
MIN_LOSS_STEPS = 3  # steps each side needs in the compared window for the loss to be compared
MAX_TUNE_BATCH = 64
DEFAULT_TUNE_SHARE = 0.2  # of the budget, when --tune-budget is not given
MAX_TUNE_SHARE = 0.5
# Before any trial has measured its warm-up: TensorFlow traces its graph in the first step (about 15 s on the
# 2-core VM when quiet, more under load: docs/measurements.md), torch has nothing to trace.
FIRST_WARMUP_ALLOWANCE_S = {"torch": 15.0, "tf": 45.0}
# Then × the warm-up the next trial follows (the best trial's so far: tune_sweep.warmups_to_allow): a doubled
# batch doubles the warm-up steps' time. Never less than MIN_WARMUP_ALLOWANCE_S.
WARMUP_ALLOWANCE_FACTOR = 2.0
MIN_WARMUP_ALLOWANCE_S = 5.0
COMPILE_WARMUP_EXTRA_S = 60.0  # a compiled trial's compilation happens during its warm-up
LOADER_WORKERS = 4
TRIAL_SETUP_ALLOWANCE_S = 10.0  # starting the framework and building the model, before a trial's training


def min_tune_budget_s(framework: str) -> float:
    """The least tuning budget: two trials (yours and one other), each its setup and its training."""
    return 2 * (TRIAL_SETUP_ALLOWANCE_S + TRIAL_STEADY_S + FIRST_WARMUP_ALLOWANCE_S[framework])


DIMENSIONS = ("batch", "precision", "threads", "channels-last", "compile", "workers")
SPACES = {  # (device, framework) -> dimensions searched by default, in order
    ("gpu", "torch"): ("batch", "precision", "compile", "channels-last", "workers"),
    ("gpu", "tf"): ("batch", "precision", "compile"),
    ("cpu", "torch"): ("threads", "precision", "batch", "channels-last"),
    ("cpu", "tf"): ("threads", "precision", "batch"),
}
TORCH_ONLY = ("channels-last", "workers")
GPU_ONLY = ("workers",)


@dataclass(frozen=True)
class Machine:
    """What the search needs to know about the device it tunes."""

    device: str  # cpu | gpu
    framework: str  # tf | torch
    logical_cpus: int | None = None
    physical_cpus: int | None = None
    cpu_bf16: bool = False  # AMX or AVX-512 BF16: bfloat16 is worth a trial on this CPU


def space_of(text: str | None, device: str, framework: str) -> tuple[tuple[str, ...], str | None]:
    """The dimensions to search, in the default order, and a one-line problem with --tune-space."""
    default = SPACES[(device, framework)]
    if text is None:
        return default, None
    asked = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in asked if name not in DIMENSIONS]
    if unknown or not asked:
        return (
            (),
            f"--tune-space: unknown {', '.join(unknown) or 'empty list'} "
            f"(choose from {', '.join(DIMENSIONS)})",
        )
    if framework == "tf" and (torch_only := [n for n in asked if n in TORCH_ONLY]):
        return (
            (),
            f"--tune-space {','.join(torch_only)}: torch only "
            "(TensorFlow's layers are NHWC already, and tf.data reads in parallel)",
        )
    if device == "cpu" and (gpu_only := [n for n in asked if n in GPU_ONLY]):
        return (
            (),
            f"--tune-space {','.join(gpu_only)}: loader workers feed a GPU; on a CPU they take its cores",
        )
    # The default's order for what it holds (the same dimensions run in the same order however they are
    # named), then the others asked for in DIMENSIONS' order.
    order = [name for name in default if name in asked]
    return tuple(order + [name for name in DIMENSIONS if name in asked and name not in order]), None


def candidates(dimension: str, best: Setting, machine: Machine, threads_default: int | None) -> list[Setting]:
    """The settings one (non-batch) dimension tries from the best so far."""
    if dimension == "precision":
        if machine.device == "gpu":
            options = [best.but(precision="bfloat16"), best.but(precision="float16")]
            if machine.framework == "torch":  # TensorFlow's default float32 is TF32 already
                options.append(best.but(precision="float32", tf32=True))
        else:
            options = [best.but(precision="bfloat16")] if machine.cpu_bf16 else []
        return [option for option in options if option != best]
    if dimension == "threads":
        counts = {machine.physical_cpus, machine.logical_cpus} - {None, threads_default, best.threads}
        return [best.but(threads=count) for count in sorted(c for c in counts if c)]
    if dimension == "channels-last":
        return [] if best.channels_last else [best.but(channels_last=True)]
    if dimension == "compile":
        return [] if best.compile else [best.but(compile=True)]
    if dimension == "workers":
        return [] if best.loader_workers else [best.but(loader_workers=LOADER_WORKERS, pin_memory=True)]
    raise ValueError(f"not a candidate dimension: {dimension}")


@dataclass
class Search:
    """Greedy, one dimension at a time from the best so far (docs/tuning.md): next() proposes a setting,
    record() takes its outcome. The reference (the user's setting) is proposed first."""

    user: Setting
    space: tuple[str, ...]
    machine: Machine
    outcomes: list[TrialOutcome] = field(default_factory=list)
    threads_default: int | None = None  # the framework's own thread count, as the reference recorded it
    _proposals: Iterator[Setting | None] | None = None

    @property
    def best(self) -> TrialOutcome | None:
        reference = self.outcomes[0] if self.outcomes else None
        best = reference if reference is not None and reference.outcome == OK else None
        for outcome in self.outcomes[1:]:
            rate = outcome.examples_per_s
            if outcome.outcome == OK and rate is not None and (best is None or rate >= _bar(best)):
                best = outcome
        return best

    @property
    def best_setting(self) -> Setting:
        best = self.best
        return best.setting if best is not None else self.user

    def next(self) -> Setting | None:
        if self._proposals is None:
            self._proposals = self._walk()
        return next(self._proposals, None)

    def record(self, outcome: TrialOutcome) -> None:
        self.outcomes.append(outcome)

    def tried(self, setting: Setting) -> bool:
        return any(outcome.setting == setting for outcome in self.outcomes)

    def _walk(self) -> Iterator[Setting | None]:
        yield self.user
        for dimension in self.space:
            if dimension == "batch":
                yield from self._batch()
                continue
            for setting in candidates(dimension, self.best_setting, self.machine, self.threads_default):
                if not self.tried(setting):
                    yield setting

    def _batch(self) -> Iterator[Setting]:
        while True:
            base = self.best
            start = base.setting if base is not None else self.user
            doubled = start.but(batch=start.batch * 2)
            if doubled.batch > MAX_TUNE_BATCH or self.tried(doubled):
                return
            yield doubled
            if self.best is base:  # failed, harmed or gained less than MIN_GAIN: the batch search ends
                return


def _bar(best: TrialOutcome) -> float:
    """The examples/s a trial needs to replace `best`."""
    return (1 + MIN_GAIN) * (best.examples_per_s or 0.0)


def gain_text(outcome: TrialOutcome, reference: TrialOutcome | None) -> str:
    rate, base = outcome.examples_per_s, reference.examples_per_s if reference else None
    if rate is None:
        return ""
    text = f"{rate:.3g} examples/s"
    if base and outcome is not reference:
        text += f" ({rate / base - 1:+.0%} on your setting)"
    return text


def why_chosen(search: Search) -> str:
    """One line: why the final run trains at the setting it does."""
    reference = search.outcomes[0] if search.outcomes else None
    best = search.best
    if best is None:
        why = reference.reason if reference is not None else "no trial ran"
        return f"your setting: no trial could be judged against it ({why})"
    if len(search.outcomes) == 1 and best is reference:
        return "your setting: the tuning budget ran out before a second trial (give a longer --tune-budget)"
    if best is reference:
        return (
            f"your setting: no trial beat its {best.examples_per_s:.3g} examples/s by {MIN_GAIN:.0%} or more "
            f"with its loss unharmed ({len(search.outcomes) - 1} other trials)"
        )
    assert reference is not None and best.examples_per_s is not None
    line = f"{best.setting.text()}: {best.examples_per_s:.3g} examples/s"
    if reference.outcome == OK and reference.examples_per_s:
        line += (
            f", {best.examples_per_s / reference.examples_per_s:.2f}× your setting's "
            f"{reference.examples_per_s:.3g} ({reference.setting.text()})"
        )
    else:
        line += f"; your setting's trial was {reference.outcome} ({reference.reason})"
    return line + f", the fastest of {len(search.outcomes)} trials with its loss unharmed"


# --- judging one trial from its run directory -------------------------------------------------------


@dataclass(frozen=True)
class LossCurve:
    steps: tuple[int, ...]  # the trial's own steps, counted from 1
    total_loss: tuple[float, ...]


@dataclass(frozen=True)
class TrialFacts:
    """What a trial's run directory says, read once."""

    failed_reason: str | None
    examples_per_s: float | None
    steady_s: float | None
    warmup_s: float | None  # from the first step's call to the end of the last step the rate leaves out
    loss: LossCurve
    non_finite_step: int | None
    threads: int | None  # the framework's intra-op threads as the training recorded them


ERROR_KINDS = (
    ("out of memory", re.compile(r"out of memory|\bOOM\b|ResourceExhausted|CUBLAS_STATUS_ALLOC", re.I)),
    # training/failures.py says `compile failed (...)`; the exceptions' own names where a log is all there is
    ("compile failed", re.compile("compile failed|BackendCompilerFailed|InductorError|TorchDynamoException")),
)


def error_kind(error: str) -> str:
    """`out of memory`, `compile failed`, or the error's first line (shortened)."""
    for kind, pattern in ERROR_KINDS:
        if pattern.search(error):
            return kind
    line = (error.strip().splitlines() or ["unknown error"])[0]
    return line if len(line) <= 120 else line[:117] + "..."


def read_trial(run_dir: Path | None, exit_code: int) -> TrialFacts:
    empty = LossCurve((), ())
    if run_dir is None:
        why = f"the collector could not record it (exit code {exit_code})"
        return TrialFacts(why, None, None, None, empty, None, None)
    files = read_run(run_dir)
    training = files.training
    loss, non_finite, ends = _loss_curve(run_dir / TRAINING_CSV)
    failed = None
    if training is None or training.status == "failed" or (exit_code not in (0, 124) and not ends):
        error = (training and training.error) or (files.run and files.run.error) or _log_error(run_dir)
        failed = error_kind(error or f"the training exited with code {exit_code}")
    elif not ends:
        failed = "no training step ran"
    recorded = training.steady_examples_per_s if training else None
    recorded = recorded if recorded is not None and recorded > 0 else None  # the record keeps finite numbers
    excluded = (training.warmup_steps_excluded or 0) if training else 0
    steady_s = ends[-1] - ends[excluded - 1] if 0 < excluded < len(ends) else None
    steady_s = steady_s if steady_s is not None and steady_s > 0 else None  # a log whose clock ran back
    batch = training.batch_size if training else None
    logged = (len(ends) - excluded) * batch / steady_s if steady_s is not None and batch else None
    steady = logged if logged is not None else recorded  # the step log's own rate, as the report reads it
    warmup_s = ends[excluded - 1] if 0 < excluded <= len(ends) else None
    threads = _threads(training.raw) if training else None
    return TrialFacts(failed, steady, steady_s, warmup_s, loss, non_finite, threads)


def _threads(training: dict) -> int | None:
    """The intra-op threads the trial's framework used (torch's count, or TensorFlow's effective one)."""
    for key in ("torch_threads", "tf_intra_op_threads"):
        if isinstance(training.get(key), int):
            return training[key]
    return None


def _log_error(run_dir: Path) -> str | None:
    from runformat import COMMAND_LOG

    try:
        lines = (run_dir / COMMAND_LOG).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    found = [line.split("error:", 1)[1].strip() for line in lines if "training: error:" in line]
    return found[-1] if found else None


def _loss_curve(path: Path) -> tuple[LossCurve, int | None, list[float]]:
    """(step, total loss) of each step with a finite loss, the first step with a non-finite one, and each
    step's elapsed_s (seconds since the first step's call)."""
    steps, losses, ends, non_finite = [], [], [], None
    for row in step_rows(path) or ():
        if row.elapsed_s is None:
            continue
        ends.append(row.elapsed_s)
        if row.loss_total is None:
            continue  # a loss not read at this step
        if not math.isfinite(row.loss_total):
            non_finite = non_finite if non_finite is not None else row.step
            continue
        steps.append(len(ends))
        losses.append(row.loss_total)
    return LossCurve(tuple(steps), tuple(losses)), non_finite, ends


def matched_loss(trial: LossCurve, reference: LossCurve) -> tuple[float, float] | None:
    """Mean total loss of each over the second half of the steps both took, or None with too few steps.

    Steps, not examples: with the learning rate scaled to the batch, a larger batch does at least as well per
    step as a smaller one unless something is wrong (an unstable rate); per example it trails early in
    training, where few examples per step already say most of what the data can (the critical batch size
    grows as the loss falls), which a trial of seconds cannot see past. The report's time to a target loss,
    on the final runs, is the comparison over the whole training."""
    if not trial.steps or not reference.steps:
        return None
    common = min(trial.steps[-1], reference.steps[-1])
    means = []
    for curve in (trial, reference):
        window = [
            loss
            for step, loss in zip(curve.steps, curve.total_loss, strict=True)
            if common / 2 < step <= common
        ]
        if len(window) < MIN_LOSS_STEPS:
            return None
        means.append(sum(window) / len(window))
    return means[0], means[1]


NO_RATE = "no steady rate recorded (no batch size for the step log's, no training.json steady_examples_per_s)"


def judge(
    run_id: str | None, setting: Setting, facts: TrialFacts, reference: TrialFacts | None
) -> TrialOutcome:
    """The trial's outcome by the rules of docs/tuning.md, in order."""
    if facts.failed_reason is not None:
        return TrialOutcome(run_id, setting, FAILED, facts.failed_reason)
    if facts.non_finite_step is not None:
        return TrialOutcome(run_id, setting, FAILED, f"non-finite loss at step {facts.non_finite_step}")
    rate, steady_s = facts.examples_per_s, facts.steady_s
    if rate is None and _long_enough(steady_s):
        return TrialOutcome(run_id, setting, FAILED, NO_RATE, None, steady_s)
    short = None
    if rate is None or not _long_enough(steady_s):
        measured = f"{steady_s:.1f} s" if steady_s is not None else "no steady span"
        short = f"steady rate over {measured}, not {TRIAL_STEADY_S:g} s"
        if not _clearly_slower(rate, steady_s, reference):
            return TrialOutcome(run_id, setting, TOO_SHORT, short, rate, steady_s)
        # A slow step leaves fewer steps after the warm-up it excludes (a third of them): slower than your
        # setting by more than MIN_GAIN, it cannot win, so it is judged on what it measured.
        short = f"slower than your setting over its {steady_s:.1f} s steady"
    if reference is None:
        return TrialOutcome(run_id, setting, OK, short, rate, steady_s)
    compared = matched_loss(facts.loss, reference.loss)
    if compared is None:
        why = "loss not compared (too few steps in the compared window)"
        return TrialOutcome(run_id, setting, OK, f"{short}; {why}" if short else why, rate, steady_s)
    mine, theirs = compared
    if mine > LOSS_HARM_RATIO * theirs:
        why = f"mean loss {mine:.3g} vs your setting's {theirs:.3g} over the same steps"
        why += f" (more than {LOSS_HARM_RATIO:g}×)"
        return TrialOutcome(run_id, setting, HARMED, why, rate, steady_s)
    return TrialOutcome(run_id, setting, OK, short, rate, steady_s)


def _clearly_slower(rate: float | None, steady_s: float | None, reference: TrialFacts | None) -> bool:
    """A trial short of TRIAL_STEADY_S that still measured a steady span, slower than your setting's
    judged rate by more than MIN_GAIN."""
    if rate is None or not steady_s or reference is None or reference.examples_per_s is None:
        return False
    return _long_enough(reference.steady_s) and rate * (1 + MIN_GAIN) < reference.examples_per_s


def _long_enough(steady_s: float | None) -> bool:
    """A steady span of TRIAL_STEADY_S or more, to the millisecond."""
    return steady_s is not None and round(steady_s, 3) >= TRIAL_STEADY_S


def trial_duration_s(setting: Setting, warmups_s: list[float], framework: str = "torch") -> float:
    """A trial's training budget: TRIAL_STEADY_S after an allowance for its warm-up, from the longest of
    `warmups_s` (tune_sweep.warmups_to_allow), the framework's FIRST_WARMUP_ALLOWANCE_S before any."""
    allowance = FIRST_WARMUP_ALLOWANCE_S[framework]
    if warmups_s:
        allowance = max(MIN_WARMUP_ALLOWANCE_S, WARMUP_ALLOWANCE_FACTOR * max(warmups_s))
    return TRIAL_STEADY_S + allowance + (COMPILE_WARMUP_EXTRA_S if setting.compile else 0.0)
