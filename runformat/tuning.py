"""A `--tune` sweep in the run directory: the setting a run trained at, and run.json's `tuning` tag.

training.json `settings` holds the Setting a training ran at (every run of ours, tuned or not); run.json
`tuning` ties the runs of one sweep together: each trial, then the final run at the chosen setting, which
also carries the trials' outcomes and why its setting won (docs/tuning.md). Standard library only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from runformat.records import is_number

TRIAL, FINAL = "trial", "final"
OK, FAILED, HARMED, TOO_SHORT = "ok", "failed", "harmed", "too short"
OUTCOMES = (OK, FAILED, HARMED, TOO_SHORT)
PRECISIONS = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class Setting:
    """What a tuning trial may change: throughput, never the task (model, data, loss, schedule rule)."""

    batch: int
    precision: str = "float32"  # float32 | float16 | bfloat16 (autocast / mixed precision)
    # GPU float32 on TF32 tensor cores: True for matmuls and convolutions, False for neither, None: the
    # framework's default (PyTorch: convolutions yes, matmuls no; TensorFlow: both)
    tf32: bool | None = None
    channels_last: bool = False  # torch: NHWC memory format for the model and the images
    compile: bool = False  # torch: torch.compile of the backbone; tf: XLA (jit_compile)
    threads: int | None = None  # CPU intra-op threads; None: the framework's default
    loader_workers: int = 0  # torch: batches prepared by this many worker processes (0: in the loop)
    pin_memory: bool = False  # torch: the workers' batches in pinned host memory

    def record(self) -> dict[str, Any]:
        return asdict(self)

    def disagreements(self, training: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
        """training.json's `batch_size` and `precision` where they differ from this setting's: field ->
        (the setting's, the training's)."""
        found = {}
        batch, precision = training.get("batch_size"), training.get("precision")
        if isinstance(batch, int) and not isinstance(batch, bool) and batch >= 1 and batch != self.batch:
            found["batch"] = (self.batch, batch)
        if precision in PRECISIONS and precision != self.precision:
            found["precision"] = (self.precision, precision)
        return found

    def with_recorded(self, training: dict[str, Any]) -> Setting:
        """This setting with training.json's own batch and precision where they disagree."""
        return replace(self, **{name: theirs for name, (_, theirs) in self.disagreements(training).items()})

    def text(self) -> str:
        """`batch 8, bfloat16, channels-last, compile`: what differs from plain float32 in one phrase."""
        parts = [
            f"batch {self.batch}",
            self.precision + {True: " + TF32", False: ", TF32 off", None: ""}[self.tf32],
        ]
        if self.channels_last:
            parts.append("channels-last")
        if self.compile:
            parts.append("compile")
        if self.threads is not None:
            parts.append(f"{self.threads} threads")
        if self.loader_workers:
            parts.append(f"{self.loader_workers} loader workers" + (", pinned" if self.pin_memory else ""))
        return ", ".join(parts)

    def train_args(self) -> list[str]:
        """The options of `python -m training train` that run at this setting."""
        args = ["--batch", str(self.batch), "--precision", self.precision]
        args += {True: ["--tf32"], False: ["--no-tf32"], None: []}[self.tf32]
        args += ["--channels-last"] * self.channels_last + ["--compile"] * self.compile
        if self.threads is not None:
            args += ["--threads", str(self.threads)]
        if self.loader_workers:
            args += ["--loader-workers", str(self.loader_workers)]
        return args + ["--pin-memory"] * self.pin_memory

    def but(self, **changes: Any) -> Setting:
        return replace(self, **changes)


def _whole(value: object, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def setting_of(data: object) -> Setting | None:
    """The Setting a `settings` object records, None when it is not one (absent, malformed, other keys)."""
    if not isinstance(data, dict):
        return None
    known = {f.name for f in fields(Setting)}
    batch = data.get("batch")
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        return None
    kept = {key: value for key, value in data.items() if key in known}
    try:
        setting = Setting(**kept)
    except TypeError:
        return None
    if not isinstance(setting.precision, str) or not all(
        isinstance(getattr(setting, name), bool) for name in ("channels_last", "compile", "pin_memory")
    ):
        return None
    if setting.tf32 is not None and not isinstance(setting.tf32, bool):
        return None
    if not _whole(setting.loader_workers, 0) or not (setting.threads is None or _whole(setting.threads, 1)):
        return None
    return setting


@dataclass(frozen=True)
class TrialOutcome:
    """One trial as the final run records it (run.json `tuning.trials[i]`)."""

    run_id: str | None
    setting: Setting
    outcome: str  # OK | FAILED | HARMED | TOO_SHORT
    reason: str | None = None  # why it failed, was harmed or too short
    examples_per_s: float | None = None  # steady examples/s (OK and HARMED trials)
    steady_s: float | None = None  # the seconds its rate was measured over

    def record(self) -> dict[str, Any]:
        return {**asdict(self), "setting": self.setting.record()}


def _finite(value: object) -> bool:
    """A trial's figure as it can be: a finite number ≥ 0."""
    return is_number(value) and value >= 0  # type: ignore[operator]


def trial_of(data: object) -> TrialOutcome | None:
    if not isinstance(data, dict) or (setting := setting_of(data.get("setting"))) is None:
        return None
    outcome = data.get("outcome")
    if outcome not in OUTCOMES:
        return None

    def number(key: str) -> float | None:
        value = data.get(key)
        return float(value) if _finite(value) else None

    run_id, reason = data.get("run_id"), data.get("reason")
    return TrialOutcome(
        run_id if isinstance(run_id, str) else None,
        setting,
        outcome,
        reason if isinstance(reason, str) else None,
        number("examples_per_s"),
        number("steady_s"),
    )


@dataclass(frozen=True)
class TuningTag:
    """run.json `tuning`: this run's place in a sweep."""

    id: str
    role: str  # TRIAL | FINAL
    position: int  # 0-based; the final run comes after the trials
    setting: Setting  # what this run trained at
    user_setting: Setting  # what the command asked for (the sweep's reference trial)
    chosen_why: str | None = None  # final: why its setting won, one line
    trials: tuple[TrialOutcome, ...] = ()  # final: every trial, in order

    def record(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "id": self.id,
            "role": self.role,
            "position": self.position,
            "setting": self.setting.record(),
            "user_setting": self.user_setting.record(),
        }
        if self.role == FINAL:
            record["chosen_why"] = self.chosen_why
            record["trials"] = [trial.record() for trial in self.trials]
        return record


def tuning_of(run_json: object) -> TuningTag | None:
    """run.json's `tuning` tag as read (from the whole run.json object), None when absent or malformed."""
    return _read_tag(run_json)[0]


def tag_disagrees(run_json: object, training: object) -> list[str]:
    """A `tuning` tag whose setting's batch or precision is not what training.json records: the training's
    own record is taken."""
    tag, _ = _read_tag(run_json)
    if tag is None or not isinstance(training, dict):
        return []
    return [
        f"run.json field tuning.setting.{name} {mine!r} is not training.json's {theirs!r}: the training's "
        "is taken"
        for name, (mine, theirs) in tag.setting.disagreements(training).items()
    ]


def tuning_problems(run_json: object) -> list[str]:
    """What of a run.json `tuning` tag that is there could not be read: the tag itself (the run then reads as
    untuned), and each trial or trial figure left out; [] when it reads whole or there is none."""
    data = run_json.get("tuning") if isinstance(run_json, dict) else None
    if data is None:
        return []
    tag, why = _read_tag(run_json)
    if tag is None:
        return [f"run.json field tuning {why}: read as an untuned run"]
    if tag.role != FINAL:
        return []
    listed = data.get("trials")
    if listed is None:
        return ["run.json field tuning.trials is missing: no trial read"]
    if not isinstance(listed, list) or not listed:
        return [f"run.json field tuning.trials is {'empty' if listed == [] else 'not a list'}: no trial read"]
    problems = []
    for index, item in enumerate(listed):
        field = f"run.json field tuning.trials[{index}]"
        if trial_of(item) is None:
            problems.append(f"{field} is not a trial (a setting and an outcome): left out")
            continue
        for key in ("examples_per_s", "steady_s"):
            value = item.get(key)
            if value is not None and not _finite(value):
                problems.append(f"{field}.{key} is {value!r}, not a number ≥ 0: read as unknown")
    return problems


def _read_tag(run_json: object) -> tuple[TuningTag | None, str | None]:
    data = run_json.get("tuning") if isinstance(run_json, dict) else None
    if not isinstance(data, dict):
        return None, "is not an object"
    setting, user = setting_of(data.get("setting")), setting_of(data.get("user_setting"))
    tag_id, role, position = data.get("id"), data.get("role"), data.get("position")
    checks = (
        (setting is not None, "has no setting it can read (setting.batch a whole number ≥ 1, ...)"),
        (user is not None, "has no user_setting it can read"),
        (isinstance(tag_id, str), "has no sweep id (text)"),
        (role in (TRIAL, FINAL), f"has role {role!r}, not {TRIAL!r} or {FINAL!r}"),
        (_whole(position, 0), "has no position (a whole number ≥ 0)"),
    )
    failed = next((why for ok, why in checks if not ok), None)
    if failed is not None or setting is None or user is None:
        return None, failed
    listed = data.get("trials")
    trials = tuple(t for t in map(trial_of, listed) if t is not None) if isinstance(listed, list) else ()
    why = data.get("chosen_why")
    return TuningTag(
        str(tag_id), str(role), int(position), setting, user, why if isinstance(why, str) else None, trials
    ), None
