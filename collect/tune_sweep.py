"""`--tune`: short trials, each its own run, then the final run at the chosen setting (docs/tuning.md).

The search and the judge are collect/tuning.py; how one run is started is collect/timed.py's, handed in.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TextIO

from collect.options import EXIT_INTERRUPTED as INTERRUPTED
from collect.tuning import (
    DEFAULT_TUNE_SHARE,
    MAX_TUNE_SHARE,
    MIN_WARMUP_ALLOWANCE_S,
    TRIAL_STEADY_S,
    Machine,
    Search,
    TrialFacts,
    gain_text,
    judge,
    min_tune_budget_s,
    read_trial,
    space_of,
    trial_duration_s,
    why_chosen,
)
from runformat import format_duration, parse_duration
from runformat.tuning import FINAL, TRIAL, Setting, TuningTag

DEFAULT_BATCH = 2  # `python -m training train`'s batch per device when --batch is not given
DATASET_TIMEOUT_S = 600.0  # the default dataset takes seconds to draw
# What `--precision mixed` asks the training for: each device's native mixed precision.
MIXED_DTYPE = {"gpu": "float16", "cpu": "bfloat16"}


@dataclass(frozen=True)
class RunRequest:
    """One run of the sweep, for collect/timed.py to start."""

    setting: Setting
    duration_s: float
    trial: bool  # a trial: no checkpoints, export or inference; --max-steps does not apply
    tag: dict  # run.json's `tuning`
    label_suffix: str


RunOne = Callable[[RunRequest], tuple[int, Path | None]]


@dataclass(frozen=True)
class TunePlan:
    budget_s: float
    tune_budget_s: float
    user: Setting
    space: tuple[str, ...]
    machine: Machine
    # run before the tuning clock starts: the default dataset generated where missing, so that the first
    # trial (your setting) does not spend its budget drawing it
    dataset_command: tuple[str, ...] = ()


def tune_budget(budget_s: float, asked_s: float | None, framework: str = "torch") -> tuple[float, str | None]:
    """The trials' wall-time budget and a one-line problem with it (too small or too large)."""
    tune_s = asked_s if asked_s is not None else DEFAULT_TUNE_SHARE * budget_s
    least_s = min_tune_budget_s(framework)
    if tune_s < least_s:
        share = f"{DEFAULT_TUNE_SHARE:.0%} of {format_duration(budget_s)} is {format_duration(tune_s)}"
        given = f"--tune-budget {format_duration(tune_s)}" if asked_s is not None else share
        return tune_s, (
            f"--tune needs at least {format_duration(least_s)} for two trials ({given}; each trial "
            f"trains {TRIAL_STEADY_S:g} s after its warm-up): give a longer DURATION or --tune-budget"
        )
    if tune_s > MAX_TUNE_SHARE * budget_s:
        return tune_s, (
            f"--tune-budget {format_duration(tune_s)} is more than {MAX_TUNE_SHARE:.0%} of the budget "
            f"{format_duration(budget_s)}: the final run needs the rest"
        )
    return tune_s, None


def machine_of(device: str, framework: str, simd: list[str] | None, physical_cpus: int | None) -> Machine:
    logical = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    bf16 = bool(simd and {"amx_bf16", "avx512_bf16"} & set(simd))
    return Machine(device, framework, logical, physical_cpus, bf16)


def new_tuning_id(device: str, now: datetime | None = None) -> str:
    return f"tune-{(now or datetime.now(timezone.utc)).strftime('%Y%m%dT%H%M%SZ')}-{device}"


def run_tuning(
    plan: TunePlan, run_one: RunOne, out: TextIO, clock: Callable[[], float] = time.monotonic
) -> int:
    """The trials while the tuning budget lasts, then the final run; its exit code (130 if interrupted)."""
    tuning_id = new_tuning_id(plan.machine.device)
    try:
        if plan.dataset_command:
            prepare_dataset(plan.dataset_command, out)
        return _sweep(tuning_id, plan, run_one, out, clock)
    except KeyboardInterrupt:  # between two runs, where no recording's own handler is installed
        _say(out, f"Tuning {tuning_id}: interrupted between runs; every run so far is kept")
        return INTERRUPTED


def prepare_dataset(command: tuple[str, ...], out: TextIO) -> None:
    """The dataset command's own line ('... is there', or what it generated); a failure is said and the
    sweep goes on (its first trial generates the dataset, or fails saying why)."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=DATASET_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        _say(out, f"Tuning: the dataset was not prepared before the trials ({type(exc).__name__})")
        return
    lines = (done.stdout.strip() or done.stderr.strip() or "no output").splitlines()
    status = "" if done.returncode == 0 else f" (exit code {done.returncode})"
    _say(out, f"Tuning: before the trials, {lines[-1]}{status}")


def warmups_to_allow(search: Search, facts: list[TrialFacts]) -> list[float]:
    """The warm-ups the next trial's allowance follows: the best trial's so far (the next setting is one
    change from it), else every uncompiled trial's. A slower trial that lost (batch 4 in true float32 on
    the H100: 1 s steps) does not lengthen the trials after it; a compiled one's includes compiling."""
    uncompiled = [(f.warmup_s, o) for f, o in zip(facts, search.outcomes, strict=True)
                  if f.warmup_s is not None and not o.setting.compile]  # fmt: skip
    best = search.best
    return [w for w, o in uncompiled if o is best] or [w for w, _ in uncompiled]


def expected_setup_s(setups_s: list[float]) -> float:
    """The setup (and teardown) the next trial is expected to take: the longest after the first trial's,
    whose own holds one-time costs (a dataset generated on first use: 24 s of the H100 sweep's first trial
    against 11-13 s for the next), the first's until a second has run; none before any."""
    return max(setups_s[1:] or setups_s or [0.0])


def _sweep(tuning_id: str, plan: TunePlan, run_one: RunOne, out: TextIO, clock: Callable[[], float]) -> int:
    search = Search(plan.user, plan.space, plan.machine)
    facts: list[TrialFacts] = []
    started = clock()
    setups_s: list[float] = []  # each trial's wall time beyond its training budget (setup, teardown)
    skipped: list[str] = []
    searched = ", ".join(plan.space)
    rest = f"then the rest of {format_duration(plan.budget_s)} at the best"
    _say(
        out,
        f"Tuning {tuning_id}: trials for up to {format_duration(plan.tune_budget_s)} ({searched}), {rest}",
    )
    while (setting := search.next()) is not None:
        position = len(search.outcomes)
        duration_s = trial_duration_s(setting, warmups_to_allow(search, facts), plan.machine.framework)
        left_s = plan.tune_budget_s - (clock() - started)
        setup_s = expected_setup_s(setups_s)
        if setups_s and setup_s + duration_s > left_s:  # it would not end within the tuning budget
            skipped.append(setting.text())
            if setup_s + TRIAL_STEADY_S + MIN_WARMUP_ALLOWANCE_S > left_s:
                skipped.append("the rest of the search")  # no other trial would end within it either
                break
            continue
        tag = TuningTag(tuning_id, TRIAL, position, setting, plan.user).record()
        began = clock()
        code, run_dir = run_one(RunRequest(setting, duration_s, True, tag, f"tune trial {position}"))
        setups_s.append(max(0.0, clock() - began - duration_s))
        if code == INTERRUPTED:
            _say(out, f"Tuning {tuning_id}: interrupted at trial {position}; no final run")
            return INTERRUPTED
        trial_facts = read_trial(run_dir, code)
        outcome = judge(run_dir.name if run_dir else None, setting, trial_facts, facts[0] if facts else None)
        facts.append(trial_facts)
        if position == 0:
            search.threads_default = trial_facts.threads
        search.record(outcome)
        reference = search.outcomes[0]
        detail = gain_text(outcome, reference)
        reason = f" ({outcome.reason})" if outcome.reason else ""
        where = f" ({run_dir.name})" if run_dir is not None else ""
        _say(out, f"Tuning trial {position}{where}: {setting.text()}: {outcome.outcome}{reason}"
                  + (f", {detail}" if detail else ""))  # fmt: skip
    if skipped:
        left_out = "; ".join(skipped)
        _say(out, f"Tuning: not tried within the tuning budget: {left_out} (give a longer --tune-budget)")
    tuning_wall_s = clock() - started
    chosen, why = search.best_setting, why_chosen(search)
    _say(out, f"Tuning {tuning_id}: chose {chosen.text()}: {why}")
    final_s = plan.budget_s - min(tuning_wall_s, plan.tune_budget_s)
    tag = TuningTag(tuning_id, FINAL, len(search.outcomes), chosen, plan.user, why, tuple(search.outcomes))
    code, _ = run_one(RunRequest(chosen, final_s, False, tag.record(), "tuned"))
    return code


def _say(out: TextIO, line: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(line, file=out, flush=True)


def tuning_plan(args, budget_s: float, counts: list[int]) -> tuple[TunePlan | None, str | None]:
    """The plan of `collect timed --tune` from its parsed options, or the one-line reason it cannot run."""
    if len(counts) > 1:
        return None, "--tune tunes one device count: give one count, then sweep counts at the chosen setting"
    if getattr(args, "nnodes", 1) > 1:
        return None, "--tune runs on one node: tune there, then train the nodes at the chosen setting"
    space, problem = space_of(args.tune_space, args.device, args.framework)
    if problem:
        return None, problem
    asked_s = None
    if args.tune_budget is not None:
        try:
            asked_s = parse_duration(args.tune_budget)
        except ValueError as exc:
            return None, f"--tune-budget: {exc}"
    tune_s, problem = tune_budget(budget_s, asked_s, args.framework)
    if problem:
        return None, problem
    precision = {"mixed": MIXED_DTYPE[args.device], None: "float32"}.get(args.precision, args.precision)
    user = Setting(batch=args.batch or DEFAULT_BATCH, precision=precision)
    dataset: tuple[str, ...] = ()
    if args.dataset is None:
        dataset = (sys.executable, "-m", "training", "dataset", "--data-dir", str(args.data_dir))
        dataset += ("--if-missing",)
    machine = _this_machine(args.device, args.framework)
    return TunePlan(budget_s, tune_s, user, space, machine, dataset), None


def _this_machine(device: str, framework: str) -> Machine:
    import psutil

    from collect.sysinfo import cpu_simd

    return machine_of(device, framework, cpu_simd(Path("/proc")), psutil.cpu_count(logical=False))
