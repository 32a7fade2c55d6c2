"""Tuned runs (`--tune`, docs/tuning.md): the speedup at the user's setting and at each side's best.

A run whose run.json `tuning` tag has role `final` is a tuned run: it trained at its sweep's chosen setting
and records every trial (runformat.tuning). Its first trial is the user's setting. For a device pair, the
speedup at each side's best is the report's own comparison of the final runs (per example); the speedup at
the user's setting divides the two reference trials' examples/s (a side not tuned stands with its own
run). Everything comes from the final runs' tags: trial run directories need not be there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from runformat.tuning import (
    FAILED,
    FINAL,
    HARMED,
    OK,
    TOO_SHORT,
    Setting,
    TrialOutcome,
    TuningTag,
    setting_of,
    tuning_of,
)
from sizing.analysis import signature
from sizing.analysis import throughput as tp
from sizing.analysis.compare import Comparison, Group
from sizing.analysis.runchecks import incomplete_reason
from sizing.model import RunData

SETTING_FIELDS = ("batch_size", "precision")  # the workload fields a sweep may change (the rest is the task)
SHOWN_TRIALS = 3  # trials that did not count, listed before "and N more"
VERBS = {FAILED: "failed", HARMED: "was harmed", TOO_SHORT: "was too short"}


def final_tag(run: RunData) -> TuningTag | None:
    """The run's tuning tag when it is the final run of a sweep, else None (untuned, or a trial)."""
    tag = tuning_of(run.meta)
    return tag if tag is not None and tag.role == FINAL else None


def run_setting(run: RunData, workload: dict) -> Setting | None:
    """What the run trained at: its tag's setting (with training.json's own batch and precision where the
    two disagree: sizing.analysis.validate warns), else training.json `settings`, else batch and
    precision."""
    tag = tuning_of(run.meta)
    if tag is not None:
        return tag.setting.with_recorded(run.training_info)
    found = setting_of(run.training_info.get("settings"))
    if found is not None:
        return found
    batch, precision = workload.get("batch_size"), workload.get("precision")
    if isinstance(batch, int) and batch >= 1:
        return Setting(batch, precision) if isinstance(precision, str) else Setting(batch)
    return None


@dataclass(frozen=True)
class Reference:
    """The examples/s at the user's setting: the sweep's first trial (None with why_unknown)."""

    examples_per_s: float | None
    why_unknown: str | None = None


def reference(tag: TuningTag) -> Reference:
    if not tag.trials:
        return Reference(None, "the final run records no trials")
    first = tag.trials[0]
    if first.setting != tag.user_setting:  # a first trial left out as malformed: none is known to be yours
        return Reference(None, "the final run records no trial at your setting first")
    if first.outcome != OK:
        return Reference(
            None, f"the trial at your setting {VERBS.get(first.outcome, first.outcome)}" + _because(first)
        )
    if first.examples_per_s is None or first.examples_per_s <= 0:
        return Reference(None, "the trial at your setting records no examples/s")
    return Reference(first.examples_per_s)


def _because(trial: TrialOutcome) -> str:
    return f" ({trial.reason})" if trial.reason else ""


def trial_text(trial: TrialOutcome) -> str:
    """'batch 16, bfloat16: failed (out of memory)'."""
    return f"{trial.setting.text()}: {trial.outcome}{_because(trial)}"


def not_counted(tags: Sequence[TuningTag]) -> list[TrialOutcome]:
    """The trials that failed, were harmed or too short, in order, without repeats."""
    found = [t for tag in tags for t in tag.trials if t.outcome != OK]
    return list(dict.fromkeys(found))


def listed(trials: Sequence[TrialOutcome], shown: int = SHOWN_TRIALS) -> str:
    """At most `shown` trials, then 'and N more'."""
    return listed_texts([trial_text(t) for t in trials], shown)


def listed_texts(texts: Sequence[str], shown: int = SHOWN_TRIALS) -> str:
    """At most `shown` of the texts joined by '; ', then 'and N more'."""
    more = len(texts) - shown
    return "; ".join(texts[:shown]) + (f"; and {more} more" if more > 0 else "")


@dataclass(frozen=True)
class Side:
    """One side of a pair: its runs' tags (all of them tuned final runs, else `tuned` is False)."""

    label: str  # "GPU", "CPU" ("baseline" when both sides are of one kind)
    run_ids: tuple[str, ...]
    tuned: bool
    tags: tuple[TuningTag, ...]
    best: tuple[Setting, ...]  # the distinct settings the side's runs trained at (its best when tuned)
    user: tuple[Setting, ...]  # the distinct user settings (an untuned side's own setting)
    at_user_examples_per_s: float | None
    at_user_unknown: str | None  # why the rate at the user's setting is not known

    @property
    def best_text(self) -> str:
        return " / ".join(s.text() for s in self.best) or "setting not recorded"

    @property
    def unsearched(self) -> bool:
        """Tuned, yet no sweep of it tried any setting but yours: its best is your setting, untested (a sweep
        that records no trial at all is not known to be that)."""
        return self.tuned and all(len(tag.trials) == 1 for tag in self.tags)


def side_of(g: Group, label: str, runs: Mapping[str, RunData]) -> Side:
    found = [(runs[a.run_id], a) for a in g.analyses if a.run_id in runs]
    tags = [t for t in (final_tag(r) for r, _ in found) if t is not None]
    tuned = bool(tags) and len(tags) == len(g.analyses)
    best = [run_setting(r, a.workload) for r, a in found]
    if not tuned:
        user = best
        rate, unknown = g.examples_per_s.mean, None if g.examples_per_s.mean else "its examples/s are unknown"
        if tags:
            unknown = "not every run of this side was tuned"
            rate = None
    else:
        user = [t.user_setting for t in tags]
        refs = [reference(t) for t in tags]
        unknown = next((r.why_unknown for r in refs if r.why_unknown), None)
        known = [r.examples_per_s for r in refs if r.examples_per_s is not None]
        rate = sum(known) / len(known) if unknown is None and known else None
    return Side(
        label, g.run_ids, tuned, tuple(tags), tuple(dict.fromkeys(s for s in best if s)),
        tuple(dict.fromkeys(s for s in user if s)), rate, unknown,
    )  # fmt: skip


@dataclass(frozen=True)
class TunedPair:
    """A GPU option against the baseline where at least one side is a tuned run."""

    side: Side  # the option's
    base: Side  # the baseline's
    at_best: float | None  # per example, the final runs (the comparison's speedup)
    at_user: float | None  # per example, the reference trials (an untuned side: its run)
    at_user_unknown: str | None
    batches_differ: bool | None  # None: a side's batch not recorded
    user_settings_differ: str | None  # "batch 2 vs 4", where the sides' user settings differ
    same_task: bool  # the workloads differ only in what a sweep may change (batch, precision)
    target_loss: float | None
    time_to_loss_s: tuple[float | None, float | None]  # (option, baseline): mean over each side's runs
    not_counted: tuple[TrialOutcome, ...]  # the trials that failed, were harmed or too short (both sides)
    failed: tuple[tuple[str, TrialOutcome], ...]  # (side label, trial): what the best could not try

    @property
    def tuned_sides(self) -> str:
        return (
            "both" if self.side.tuned and self.base.tuned else ("option" if self.side.tuned else "baseline")
        )

    @property
    def not_tuned(self) -> str | None:
        """'the CPU side was not tuned', None when both were."""
        left = [s for s in (self.side, self.base) if not s.tuned]
        return f"the {left[0].label} side was not tuned" if left else None

    @property
    def time_to_loss_speedup(self) -> float | None:
        mine, theirs = self.time_to_loss_s
        return theirs / mine if mine and theirs is not None else None


def labels(c: Comparison, base: Group) -> tuple[str, str]:
    mine, theirs = c.group.kind.upper(), base.kind.upper()
    return (mine, theirs) if mine != theirs else (f"this {mine}", "baseline")


def same_task(c: Comparison) -> bool:
    """The comparison's workloads are one task (only_settings_differ)."""
    return only_settings_differ(c.unknown_fields, c.differences)


def same_task_of(workload: dict, other: dict) -> bool:
    """Two workloads are one task (only_settings_differ)."""
    unknown = signature.unknown_fields(workload, other)
    return only_settings_differ(unknown, signature.differences(workload, other))


def only_settings_differ(unknown_fields: Sequence[str], differences: Sequence[str]) -> bool:
    """Every workload field but batch and precision known on both sides, and only those two differ: a
    sweep may change them, so one unknown on a side leaves the task the same."""
    return all(f in SETTING_FIELDS for f in unknown_fields) and all(
        d.split(" ", 1)[0] in SETTING_FIELDS for d in differences
    )


def _differ(side: Side, base: Side) -> str | None:
    if not side.user or not base.user:
        return "not recorded on one side"  # unknown is never the same as anything, not even unknown
    if len(side.user) != 1 or len(base.user) != 1:
        return None if side.user == base.user else "not recorded alike"
    mine, theirs = side.user[0], base.user[0]
    parts = [
        f"batch {mine.batch} vs {theirs.batch}" if mine.batch != theirs.batch else "",
        f"{mine.precision} vs {theirs.precision}" if mine.precision != theirs.precision else "",
    ]
    return "; ".join(p for p in parts if p) or None


def time_to_loss_s(runs: Sequence[RunData], target_loss: float | None) -> float | None:
    """The mean over the runs of sections.speed's time to the target loss; None unless all reached it."""
    if target_loss is None or not runs:
        return None
    found = [tp.time_to_loss(r.training, r.training_info, target_loss).seconds for r in runs]
    return None if any(s is None for s in found) else sum(found) / len(found)  # type: ignore[arg-type]


def tuned_pairs(
    comparisons: Sequence[Comparison],
    baseline: Group | None,
    runs: Sequence[RunData],
    target_loss: float | None,
) -> dict[tuple[str, ...], TunedPair]:
    """Each option's tuned figures, by its group's run ids; an option without a tuned side is left out."""
    by_id = {r.run_id: r for r in runs}
    found = {c.group.run_ids: tuned_pair(c, baseline, by_id, target_loss) for c in comparisons}
    return {ids: pair for ids, pair in found.items() if pair is not None}


def tuned_pair(
    c: Comparison, base: Group | None, runs: Mapping[str, RunData], target_loss: float | None
) -> TunedPair | None:
    """The pair's tuned figures, None unless one side at least is a tuned run."""
    if base is None or c.is_baseline:
        return None
    mine, theirs = labels(c, base)
    side, other = side_of(c.group, mine, runs), side_of(base, theirs, runs)
    if not side.tuned and not other.tuned:  # some repeats tuned, others not: not a tuned side
        return None
    at_user, unknown = None, side.at_user_unknown or other.at_user_unknown
    if unknown:
        unknown = f"{(side if side.at_user_unknown else other).label}: {unknown}"
    elif side.at_user_examples_per_s and other.at_user_examples_per_s:
        at_user = side.at_user_examples_per_s / other.at_user_examples_per_s
    batches = (
        {s.batch for s in side.best} != {s.batch for s in other.best} if side.best and other.best else None
    )
    failed = [(s.label, t) for s in (side, other) for t in not_counted(s.tags) if t.outcome == FAILED]
    timing = tuple(time_to_loss_s([runs[i] for i in s.run_ids if i in runs], target_loss)
                   for s in (side, other))  # fmt: skip
    return TunedPair(
        side, other, c.speedup if not c.in_steps else None, at_user, unknown, batches, _differ(side, other),
        same_task(c), target_loss, (timing[0], timing[1]), tuple(not_counted([*side.tags, *other.tags])),
        tuple(failed),
    )  # fmt: skip


def tuned_runs(runs: Sequence[RunData]) -> list[tuple[RunData, TuningTag]]:
    """Every tuned (final) run of the report, in report order."""
    return [(r, tag) for r in runs if (tag := final_tag(r)) is not None]


@dataclass(frozen=True)
class Folded:
    """The runs the report sizes, after a sweep's trials are folded into its final run."""

    runs: tuple[RunData, ...]
    trial_of: dict[str, str]  # a folded trial's run id -> its sweep's final run id
    notes: tuple[str, ...]  # one line per sweep folded, and per trial whose final run is not given


def fold_trials(runs: Sequence[RunData], include_incomplete: bool = False) -> Folded:
    """A trial is a short run at a setting under trial, not a training of its own: where its sweep's final
    run is given too, the final run stands for it (its tag records every trial's outcome) and the trial is
    not sized as a run. A trial given without its final run, or with one left out as incomplete (killed
    while it trained; `include_incomplete`: not left out), is sized as a run, with a note."""
    given = {tag.id: run for run in runs if (tag := final_tag(run)) is not None}
    stopped = {
        sweep: reason
        for sweep, run in given.items()
        if not include_incomplete and (reason := incomplete_reason(run.meta, run.training_info, run.phases))
    }
    finals = {sweep: run.run_id for sweep, run in given.items() if sweep not in stopped}
    kept: list[RunData] = []
    folded: dict[str, list[str]] = {}
    lone: list[tuple[str, str]] = []
    for run in runs:
        tag = tuning_of(run.meta)
        if tag is None or tag.role == FINAL:
            kept.append(run)
        elif tag.id in finals:
            folded.setdefault(tag.id, []).append(run.run_id)
        else:
            kept.append(run)
            lone.append((run.run_id, tag.id))
    notes = [
        f"{len(ids)} trial{'s' * (len(ids) > 1)} of tuning sweep {sweep} ({', '.join(ids)}) read through its "
        f"final run {finals[sweep]} (Tuning trials), not sized as runs of their own"
        for sweep, ids in folded.items()
    ]
    notes += [
        f"{run_id}: a --tune trial (a short run at a setting under trial) whose sweep's final run "
        + (
            f"{given[sweep].run_id} is left out as incomplete ({stopped[sweep]})"
            if sweep in stopped
            else "is not in the report"
        )
        + ": sized as a run of its own"
        for run_id, sweep in lone
    ]
    trial_of = {run_id: finals[sweep] for sweep, ids in folded.items() for run_id in ids}
    return Folded(tuple(kept), trial_of, tuple(notes))
