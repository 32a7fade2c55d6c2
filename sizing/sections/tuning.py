"""The Tuning section (one row per tuned run, its trials, each tuned pair) and the Decision's tuned clause.

A report without a tuned run has no Tuning table (the JSON keeps `sections.tuning` with empty lists).
"""

from __future__ import annotations

from collections.abc import Sequence

from runformat.tuning import OK, TrialOutcome, TuningTag
from sizing.analysis import tuning as tn
from sizing.analysis.compare import Comparison
from sizing.context import ReportContext
from sizing.model import RunData, Section, Table
from sizing.text import fmt, fmt_seconds

PER_EXAMPLE = "compared per example, never per step"


def _times(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.1f}×"


def pairs(ctx: ReportContext) -> list[tuple[Comparison, tn.TunedPair]]:
    found = [(c, ctx.tuned_pair(c)) for c in ctx.comparisons if not c.is_baseline]
    return [(c, p) for c, p in found if p is not None]


def at_user_text(p: tn.TunedPair) -> str:
    """'9.0× at your setting', '9.0× at your settings (batch 2 vs 4)', 'at your setting unknown (...)'."""
    if p.at_user is None:
        return f"at your setting unknown ({p.at_user_unknown or 'examples/s unknown'})"
    if p.user_settings_differ:
        return f"{_times(p.at_user)} at your settings ({p.user_settings_differ})"
    return f"{_times(p.at_user)} at your setting"


def clause(p: tn.TunedPair) -> str:
    """The Decision's tuned clause: 'tuned: 12.4× per example at each side's best (GPU batch 8, bfloat16;
    CPU batch 4, float32, 2 threads); 9.0× at your setting'."""
    mine, theirs = p.side, p.base
    if mine.tuned and theirs.tuned:
        best = f"{_times(p.at_best)} per example at each side's best ({_best(mine)}; {_best(theirs)})"
        return f"tuned: {best}; {at_user_text(p)}"
    tuned, plain = (mine, theirs) if mine.tuned else (theirs, mine)
    best = f"{_times(p.at_best)} per example at the {tuned.label}'s best ({tuned.best_text}) against the "
    best += f"{plain.label}'s untuned run ({plain.best_text})"
    return f"tuned {tuned.label} only: {best}; {at_user_text(p)}"


def _best(side: tn.Side) -> str:
    """'CPU batch 2, float32', and where its sweep tried nothing else, that it is untested."""
    unsearched = ", the only setting its tuning budget held" if side.unsearched else ""
    return f"{side.label} {side.best_text}{unsearched}"


def caveat(found: Sequence[tn.TunedPair]) -> str | None:
    """The trials that failed bound each side's best (a batch search stopped at out of memory): one line."""
    failed = list(dict.fromkeys((label, t) for p in found for label, t in p.failed))
    if not failed:
        return None
    listed = tn.listed_texts([f"{label} {tn.trial_text(t)}" for label, t in failed])
    return f"Each side's best is the best of the trials that ran, not the device's limit: {listed}."


def _setting_json(setting) -> dict | None:
    return None if setting is None else {**setting.record(), "text": setting.text()}


def _trial_json(position: int, t: TrialOutcome) -> dict:
    return {
        "position": position, "run_id": t.run_id, "setting": _setting_json(t.setting), "outcome": t.outcome,
        "reason": t.reason, "examples_per_s": t.examples_per_s, "steady_s": t.steady_s,
    }  # fmt: skip


def _chosen_trial(tag: TuningTag) -> TrialOutcome | None:
    return next((t for t in tag.trials if t.outcome == OK and t.setting == tag.setting), None)


def run_entry(run: RunData, tag: TuningTag, examples_per_s: float | None, device: str) -> dict:
    ref, chosen = tn.reference(tag), _chosen_trial(tag)
    return {
        "run_id": run.run_id, "device": device, "sweep_id": tag.id, "position": tag.position,
        "user_setting": _setting_json(tag.user_setting), "user_examples_per_s": ref.examples_per_s,
        "user_examples_per_s_unknown_reason": ref.why_unknown,
        "chosen_setting": _setting_json(tag.setting), "chosen_examples_per_s": examples_per_s,
        "chosen_trial_examples_per_s": chosen.examples_per_s if chosen else None,
        "chosen_why": tag.chosen_why,
        "trials": [_trial_json(i, t) for i, t in enumerate(tag.trials)],
    }  # fmt: skip


def pair_entry(c: Comparison, p: tn.TunedPair) -> dict:
    mine, theirs = p.time_to_loss_s
    not_counted = [tn.trial_text(t) for t in p.not_counted]
    return {
        "group": list(p.side.run_ids), "baseline": list(p.base.run_ids), "name": c.group.name,
        "tuned_sides": p.tuned_sides, "not_tuned": p.not_tuned,
        "speedup_at_user_setting": p.at_user, "speedup_at_user_setting_unknown_reason": p.at_user_unknown,
        "user_settings_differ": p.user_settings_differ, "speedup_at_best": p.at_best,
        "best_setting": p.side.best_text, "baseline_best_setting": p.base.best_text,
        "batches_differ": p.batches_differ, "same_task": p.same_task,
        "target_loss": p.target_loss, "time_to_target_loss_s": mine,
        "baseline_time_to_target_loss_s": theirs, "speedup_by_time_to_target_loss": p.time_to_loss_speedup,
        "trials_not_counted": not_counted[: tn.SHOWN_TRIALS],
        "trials_not_counted_more": max(0, len(not_counted) - tn.SHOWN_TRIALS),
        "decision_clause": clause(p),
    }  # fmt: skip


def _batches(p: tn.TunedPair) -> str:
    if p.batches_differ is None:
        return f"batch not recorded on one side: {PER_EXAMPLE}"
    if not p.batches_differ:
        return "the same batch"
    mine = "/".join(str(s.batch) for s in p.side.best) or "?"
    theirs = "/".join(str(s.batch) for s in p.base.best) or "?"
    return f"batches differ ({mine} vs {theirs}): {PER_EXAMPLE}"


def _time_to(p: tn.TunedPair) -> str:
    if p.target_loss is None:
        return "n/a (no target loss)"
    mine, theirs = p.time_to_loss_s
    text = f"{p.side.label} {fmt_seconds(mine)}, {p.base.label} {fmt_seconds(theirs)}".replace(
        "n/a", "not reached"
    )
    return text + (f" ({_times(p.time_to_loss_speedup)})" if p.time_to_loss_speedup else "")


def _at_user_cell(p: tn.TunedPair) -> str:
    if p.at_user is None:
        return f"unknown ({p.at_user_unknown or 'examples/s unknown'})"
    return _times(p.at_user) + (
        f" (your settings differ: {p.user_settings_differ})" if p.user_settings_differ else ""
    )


def _pair_row(c: Comparison, p: tn.TunedPair) -> tuple[str, ...]:
    best = f"{p.side.label}: {p.side.best_text}; {p.base.label}: {p.base.best_text}"
    if p.not_tuned:
        best += f" ({p.not_tuned})"
    name = c.group.name
    if not p.same_task:
        differ = "; ".join([*c.differences, *(f"{f} unknown" for f in c.unknown_fields)])
        name += f" (NOT the same task: {differ})"
    return (
        name, _at_user_cell(p), f"{_times(p.at_best)} per example", best, _batches(p), _time_to(p),
        tn.listed(p.not_counted) or "none",
    )  # fmt: skip


def tuning_section(ctx: ReportContext) -> Section:
    analyses = {a.run_id: a for a in ctx.analyses}
    runs, run_rows, trial_rows = [], [], []
    for run, tag in tn.tuned_runs(ctx.runs):
        a = analyses.get(run.run_id)
        rate = a.throughput.examples_per_s if a else None
        entry = run_entry(run, tag, rate, a.kind if a else "unknown")
        runs.append(entry)
        user = fmt(
            entry["user_examples_per_s"],
            3,
            unknown=f"unknown ({entry['user_examples_per_s_unknown_reason']})",
        )
        run_rows.append((
            run.run_id, entry["device"].upper(), tag.id, tag.user_setting.text(), user, tag.setting.text(),
            fmt(rate, 3), tag.chosen_why or "not recorded",
        ))  # fmt: skip
        trial_rows += [
            (run.run_id, str(i), t.setting.text(), t.outcome, t.reason or "", fmt(t.examples_per_s, 3),
             fmt(t.steady_s, 1))
            for i, t in enumerate(tag.trials)
        ]  # fmt: skip
    found = pairs(ctx)
    data = {"runs": runs, "pairs": [pair_entry(c, p) for c, p in found]}
    if not runs:
        return Section("tuning", "Tuning", data)
    note = ("A --tune sweep's final run trains at the chosen setting; its first trial is your setting "
            "(docs/tuning.md). Examples/s of the final run are the report's steady rate.")  # fmt: skip
    tables = [
        Table("Tuning", ("Run", "Device", "Sweep", "Your setting", "Examples/s at your setting",
                         "Chosen setting", "Examples/s at the chosen setting (final run)", "Why chosen"),
              tuple(run_rows), note),
        Table("Tuning trials", ("Run", "Trial", "Setting", "Outcome", "Reason", "Examples/s", "Steady s"),
              tuple(trial_rows), "Trial 0 is your setting; the final run records every trial."),
    ]  # fmt: skip
    if found:
        headers = ("Configuration", "At your setting", "At each side's best", "Best settings", "Batches",
                   f"Time to loss ≤ {fmt(ctx.target_loss, 4)}", "Trials that did not count")  # fmt: skip
        note = (
            f"Against the baseline, {PER_EXAMPLE}: a tuned pair usually differs in batch. At your setting: "
            "the sweeps' first trials (a side not tuned: its run); at each side's best: the final runs."
        )
        tables.append(Table("Tuned pairs", headers, tuple(_pair_row(c, p) for c, p in found), note))
    return Section("tuning", "Tuning", data, tuple(tables))
