"""Tuned runs in the sizing report (issue 34, docs/tuning.md): the speedup at the user's setting and at
each side's best, the Tuning section and the Decision's tuned clause (sizing.analysis.tuning and
sizing.sections.tuning).

The crafted runs: reference_gpu at batch 8 is 10 steps/s = 80 examples/s, reference_cpu at batch 4 is
0.5 steps/s = 2 examples/s: 40× at each side's best. The sweeps' first trials (the user's batch 2) record
20 and 1 examples/s: 20× at the user's setting.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest
from schemacheck import validate_report_json
from sizingfixtures import reference_cpu, reference_gpu, renamed, with_info, with_system, write_run

from runformat.tuning import FAILED, FINAL, HARMED, OK, TOO_SHORT, TRIAL, Setting, TrialOutcome, TuningTag
from sizing import ReportSettings, build_report, to_json
from sizing.analysis import tuning as tn
from sizing.cli import main as sizing_main
from sizing.model import RunData, UsageError
from sizing.output.render import render_html, render_markdown
from sizing.sections import decision_caveats as dcv

USER = Setting(2)
GPU_BEST = Setting(8, "bfloat16", compile=True)
CPU_BEST = Setting(4, threads=8)


def trial(setting: Setting, outcome: str = OK, rate: float | None = None, reason: str | None = None,
          steady_s: float | None = 25.0) -> TrialOutcome:  # fmt: skip
    return TrialOutcome(f"trial-{setting.batch}-{outcome}", setting, outcome, reason, rate, steady_s)


def tuned(run: RunData, best: Setting, trials: list[TrialOutcome], user: Setting = USER,
          role: str = FINAL) -> RunData:  # fmt: skip
    """The run as a sweep's final run at `best` (training.json batch and precision follow the setting)."""
    tag = TuningTag(
        f"sweep-{run.run_id}", role, len(trials), best, user, "fastest ok trial (+5 %)", tuple(trials)
    )
    run = with_info(run, batch_size=best.batch, precision=best.precision, settings=best.record())
    return replace(run, meta={**run.meta, "tuning": tag.record()})


def gpu_final(trials: list[TrialOutcome] | None = None, user: Setting = USER) -> RunData:
    found = trials or [trial(user, rate=20.0), trial(Setting(4), rate=45.0), trial(GPU_BEST, rate=78.0)]
    return tuned(reference_gpu(), GPU_BEST, found, user)


def cpu_final(trials: list[TrialOutcome] | None = None, user: Setting = USER) -> RunData:
    found = trials or [trial(user, rate=1.0), trial(CPU_BEST, rate=1.9)]
    return tuned(reference_cpu(), CPU_BEST, found, user)


def report_of(*runs: RunData):
    return build_report(list(runs), ReportSettings())


def pair_of(report) -> dict:
    (pair,) = to_json(report)["sections"]["tuning"]["pairs"]
    return pair


def test_both_sides_tuned_give_the_speedup_at_each_best_and_at_the_users_setting() -> None:
    report = report_of(cpu_final(), gpu_final())
    (option,) = report.decision.options
    assert option.line.endswith(
        "tuned: 40.0× per example at each side's best (GPU batch 8, bfloat16, compile; CPU batch 4, float32, "
        "8 threads); 20.0× at your setting."
    )
    assert option.line.startswith("Crafted H100: 40.0× faster")  # batch and precision are the sweep's
    assert not any("No GPU run trains" in c for c in report.decision.caveats)
    pair = pair_of(report)
    assert pair["speedup_at_best"] == pytest.approx(40.0)
    assert pair["speedup_at_user_setting"] == pytest.approx(20.0)
    assert pair["tuned_sides"] == "both" and pair["not_tuned"] is None and pair["same_task"]
    assert pair["best_setting"] == "batch 8, bfloat16, compile"
    assert pair["baseline_best_setting"] == "batch 4, float32, 8 threads"
    decision = to_json(report)["decision"]["options"][0]["tuned"]
    assert decision["speedup_at_best"] == pytest.approx(40.0) and decision["batches_differ"]
    assert any("NOT like-for-like (batch_size 8 vs 4" in line for line in report.headline)  # kept in full


def test_the_tuning_section_lists_every_tuned_run_with_its_trials() -> None:
    report = report_of(cpu_final(), gpu_final())
    runs = {r["run_id"]: r for r in to_json(report)["sections"]["tuning"]["runs"]}
    gpu = runs["ref-gpu"]
    assert gpu["device"] == "gpu" and gpu["sweep_id"] == "sweep-ref-gpu" and gpu["position"] == 3
    assert gpu["user_setting"]["text"] == "batch 2, float32" and gpu["user_examples_per_s"] == 20.0
    assert gpu["chosen_setting"]["text"] == "batch 8, bfloat16, compile"
    assert gpu["chosen_examples_per_s"] == pytest.approx(80.0)  # the final run's own steady rate
    assert gpu["chosen_trial_examples_per_s"] == 78.0 and gpu["chosen_why"] == "fastest ok trial (+5 %)"
    assert [t["examples_per_s"] for t in gpu["trials"]] == [20.0, 45.0, 78.0]
    assert gpu["trials"][1] == {
        "position": 1, "run_id": "trial-4-ok", "setting": {**Setting(4).record(), "text": "batch 4, float32"},
        "outcome": OK, "reason": None, "examples_per_s": 45.0, "steady_s": 25.0,
    }  # fmt: skip
    markdown = render_markdown(report)
    assert "## Tuning\n" in markdown and "## Tuning trials" in markdown and "## Tuned pairs" in markdown
    assert "| ref-gpu | 2 | batch 8, bfloat16, compile | ok |  | 78.000 | 25.0 |" in markdown
    assert "<h2>Tuned pairs</h2>" in render_html(report)


def test_a_side_not_tuned_is_named_and_stands_with_its_own_run() -> None:
    report = report_of(reference_cpu(), gpu_final())
    (option,) = report.decision.options
    assert option.line.endswith(
        "tuned GPU only: 80.0× per example at the GPU's best (batch 8, bfloat16, compile) against the CPU's "
        "untuned run (batch 2, float32); 20.0× at your setting."
    )
    pair = pair_of(report)
    assert pair["tuned_sides"] == "option" and pair["not_tuned"] == "the CPU side was not tuned"
    assert pair["speedup_at_best"] == pytest.approx(80.0)  # 80 / the untuned run's 1.0 examples/s
    assert pair["speedup_at_user_setting"] == pytest.approx(20.0)  # the trial's 20 over the run's 1.0
    assert [r["run_id"] for r in to_json(report)["sections"]["tuning"]["runs"]] == ["ref-gpu"]
    baseline_only = pair_of(report_of(cpu_final(), reference_gpu()))
    assert (
        baseline_only["tuned_sides"] == "baseline"
        and baseline_only["not_tuned"] == "the GPU side was not tuned"
    )
    assert baseline_only["speedup_at_best"] == pytest.approx(10.0)  # 20 / 2
    assert baseline_only["speedup_at_user_setting"] == pytest.approx(20.0)  # 20 / the trial's 1.0


@pytest.mark.parametrize(
    ("outcome", "reason", "said"),
    [
        (FAILED, "out of memory", "GPU: the trial at your setting failed (out of memory)"),
        (
            TOO_SHORT,
            "measured over 12 s",
            "GPU: the trial at your setting was too short (measured over 12 s)",
        ),
    ],
)
def test_a_reference_trial_not_ok_leaves_the_speedup_at_your_setting_unknown(
    outcome: str, reason: str, said: str
) -> None:
    trials = [
        trial(USER, outcome, 20.0 if outcome == TOO_SHORT else None, reason),
        trial(GPU_BEST, rate=78.0),
    ]
    report = report_of(cpu_final(), gpu_final(trials))
    pair = pair_of(report)
    assert pair["speedup_at_user_setting"] is None
    assert pair["speedup_at_user_setting_unknown_reason"] == said
    assert pair["speedup_at_best"] == pytest.approx(40.0)
    assert report.decision.options[0].line.endswith(f"; at your setting unknown ({said}).")


def test_trials_that_did_not_count_are_listed_with_why_and_bound_the_best() -> None:
    trials = [
        trial(USER, rate=20.0),
        trial(Setting(16, "bfloat16", compile=True), FAILED, None, "out of memory"),
        trial(Setting(8, "float16", compile=True), FAILED, None, "non-finite loss"),
        trial(Setting(4, "float16"), TOO_SHORT, 60.0, "measured over 12 s", 12.0),
        trial(Setting(8, channels_last=True), HARMED, 90.0, "loss 1.4× your setting's"),
        trial(GPU_BEST, rate=78.0),
    ]
    report = report_of(cpu_final(), gpu_final(trials))
    pair = pair_of(report)
    assert pair["trials_not_counted"] == [
        "batch 16, bfloat16, compile: failed (out of memory)",
        "batch 8, float16, compile: failed (non-finite loss)",
        "batch 4, float16: too short (measured over 12 s)",
    ]
    assert pair["trials_not_counted_more"] == 1
    markdown = render_markdown(report)
    assert "too short (measured over 12 s); and 1 more |" in markdown
    assert (
        "| ref-gpu | 4 | batch 8, float32, channels-last | harmed | loss 1.4× your setting's | 90.000 |"
        in markdown
    )
    options = [c for c in report.context.comparisons if not c.is_baseline]
    weighted = dcv.caveats(report.context, options)
    expected = (
        "Each side's best is the best of the trials that ran, not the device's limit: GPU batch 16, "
        "bfloat16, compile: failed (out of memory); GPU batch 8, float16, compile: failed (non-finite loss)."
    )
    assert weighted[-1] == (dcv.PARTIAL, expected)


def test_batches_differ_is_said_and_the_same_batch_is_not() -> None:
    report = report_of(cpu_final(), gpu_final())
    assert pair_of(report)["batches_differ"]
    assert "batches differ (8 vs 4): compared per example, never per step" in render_markdown(report)
    same = Setting(4, "bfloat16")
    report = report_of(
        cpu_final(), tuned(reference_gpu(), same, [trial(USER, rate=20.0), trial(same, rate=39.0)])
    )
    assert not pair_of(report)["batches_differ"]
    assert "| the same batch |" in render_markdown(report)


def test_a_batch_not_recorded_is_not_the_same_batch() -> None:
    """An untuned baseline that records no batch (nor settings, nor the step times its step log's batch
    would come from): unknown, never 'the same batch'. Its step log's batch, where it has one, is read."""
    plain_cpu = with_info(reference_cpu(), batch_size=None, settings=None)
    read = report_of(plain_cpu, gpu_final())
    assert pair_of(read)["batches_differ"] is True
    assert (
        "against the CPU's untuned run (batch 2, float32); 20.0× at your setting"
        in read.decision.options[0].line
    )
    plain_cpu = replace(plain_cpu, training=plain_cpu.training.drop(columns=["step_time_s"]))
    report = report_of(plain_cpu, gpu_final())
    assert pair_of(report)["batches_differ"] is None
    assert "against the CPU's untuned run (setting not recorded)" in report.decision.options[0].line
    assert "| batch not recorded on one side: compared per example, never per step |" in render_markdown(
        report
    )
    validate_report_json(json.loads(json.dumps(to_json(report), default=str)))


def test_users_settings_that_differ_are_said() -> None:
    cpu = cpu_final([trial(Setting(4), rate=2.0), trial(CPU_BEST, rate=1.9)], user=Setting(4))
    report = report_of(cpu, gpu_final())
    assert pair_of(report)["user_settings_differ"] == "batch 2 vs 4"
    assert report.decision.options[0].line.endswith("; 10.0× at your settings (batch 2 vs 4).")


def test_a_pair_that_differs_in_the_task_stays_not_like_for_like() -> None:
    gpu = with_info(gpu_final(), preset="standard")
    report = report_of(cpu_final(), gpu)
    (option,) = report.decision.options
    assert "(NOT like-for-like: preset standard vs small; batch_size 8 vs 4" in option.line
    assert any(c.startswith("No GPU run trains the baseline's workload") for c in report.decision.caveats)
    assert not pair_of(report)["same_task"]
    assert "tuned" not in option.line  # no per-example speedup 'at each side's best' across two tasks
    assert " (NOT the same task: preset standard vs small; batch_size 8 vs 4" in render_markdown(report)


def test_a_tuned_baseline_is_still_judged_weak() -> None:
    cpu = with_system(cpu_final(), cgroup_cpu_limit_cpus=2)
    report = report_of(cpu, gpu_final())
    assert report.decision.caveats[0].startswith(
        "The baseline is weak: a cgroup CPU quota allowed 2 CPUs of 8"
    )


def test_the_time_to_the_target_loss_is_the_time_to_target_sections() -> None:
    report = report_of(cpu_final(), gpu_final())
    pair = pair_of(report)
    times = {row["run_id"]: row["time_to_target_loss_s"] for row in to_json(report)["sections"]["time_to"]}
    assert pair["target_loss"] == report.context.target_loss is not None
    assert pair["time_to_target_loss_s"] == times["ref-gpu"] and times["ref-gpu"] is not None
    assert pair["baseline_time_to_target_loss_s"] == times["ref-cpu"] and times["ref-cpu"] is not None
    assert pair["speedup_by_time_to_target_loss"] == pytest.approx(times["ref-cpu"] / times["ref-gpu"])


def test_a_trial_run_is_not_a_tuned_run() -> None:
    trial_run = tuned(renamed(reference_gpu(), "gpu-trial"), USER, [], role=TRIAL)
    assert tn.final_tag(trial_run) is None and tn.final_tag(gpu_final()) is not None
    report = report_of(reference_cpu(), trial_run)
    assert to_json(report)["sections"]["tuning"] == {"runs": [], "pairs": []}


def test_an_untuned_report_has_no_tuning_section_and_the_same_decision() -> None:
    report = report_of(reference_cpu(), reference_gpu())
    data = to_json(report)
    assert data["sections"]["tuning"] == {"runs": [], "pairs": []}
    assert data["decision"]["options"][0]["tuned"] is None and report.decision.options[0].tuned is None
    assert "Tuning" not in render_markdown(report) and "Tuned" not in render_html(report)
    assert report.decision.options[0].line.startswith("Crafted H100: 20.0× faster (within-run")
    assert "tuned" not in report.decision.options[0].line


def test_the_schema_types_the_tuning_section() -> None:
    data = json.loads(json.dumps(to_json(report_of(cpu_final(), gpu_final())), default=str))
    validate_report_json(data)
    changes = [
        (("runs", 0, "trials", 0, "outcome"), "crashed"),
        (("pairs", 0, "tuned_sides"), "none"),
        (("runs", 0, "chosen_setting", "batch"), 0),
    ]
    for path, value in changes:
        broken = json.loads(json.dumps(data))
        where = broken["sections"]["tuning"]
        for key in path[:-1]:
            where = where[key]
        where[path[-1]] = value
        with pytest.raises(jsonschema.ValidationError):
            validate_report_json(broken)
    del data["sections"]["tuning"]
    with pytest.raises(jsonschema.ValidationError):
        validate_report_json(data)


def test_the_tag_survives_the_run_directory_and_the_cli(tmp_path: Path) -> None:
    for run in (cpu_final(), gpu_final()):
        write_run(tmp_path / "runs", run)
    out = tmp_path / "report.md"
    assert sizing_main(["ref-cpu", "ref-gpu", "--data-dir", str(tmp_path), "--out", str(out)]) == 0
    assert "20.0× at your setting." in out.read_text(encoding="utf-8").split("## Summary")[0]


def test_a_first_trial_that_is_not_your_setting_is_no_reference() -> None:
    """A malformed first trial is left out when read: the one now first (batch 4) is not your setting."""
    gpu = gpu_final([trial(Setting(4), rate=45.0), trial(GPU_BEST, rate=78.0)])
    pair = pair_of(report_of(cpu_final(), gpu))
    assert pair["speedup_at_user_setting"] is None
    assert "no trial at your setting first" in pair["speedup_at_user_setting_unknown_reason"]


def test_a_side_tuned_in_some_repeats_only_is_not_a_tuned_pair() -> None:
    """Two GPU repeats of one workload, one of them a sweep's final run (its sweep kept your setting)."""
    kept = tuned(reference_gpu(), USER, [trial(USER, rate=20.0), trial(Setting(4), rate=20.5)])
    plain_gpu = renamed(reference_gpu(), "20261124T120000Z-gpu-box")
    report = report_of(reference_cpu(), kept, plain_gpu)
    (option,) = report.decision.options
    assert len(option.group) == 2 and option.tuned is None


def test_malformed_tags_read_as_absent_or_without_the_bad_parts() -> None:
    from runformat.tuning import setting_of, tuning_of

    tag = TuningTag("s", FINAL, 1, USER, USER, "why", (trial(USER, rate=1.0),)).record()
    assert tuning_of({"tuning": {**tag, "trials": 5}}).trials == ()  # type: ignore[union-attr]
    assert setting_of({**USER.record(), "threads": "x"}) is None
    assert setting_of({**USER.record(), "loader_workers": -1}) is None
    assert setting_of({**USER.record(), "threads": 4}) == USER.but(threads=4)


def trial_of_sweep(final: RunData, run_id: str, setting: Setting = USER) -> RunData:
    """A trial run of `final`'s sweep (the same tuning id), at `setting`."""
    sweep = final.meta["tuning"]["id"]
    tag = TuningTag(sweep, TRIAL, 0, setting, USER)
    run = with_info(renamed(reference_gpu(), run_id), batch_size=setting.batch, settings=setting.record())
    return replace(run, meta={**run.meta, "tuning": tag.record()})


def test_a_sweeps_trials_given_with_its_final_run_are_read_through_it() -> None:
    """Trials given beside their final run (a whole data directory, say) are no comparison groups of their
    own: the Decision has one line for the GPU, the final run's, and a note names the trials folded."""
    gpu = gpu_final()
    trials = [
        trial_of_sweep(gpu, "20261124T115900Z-gpu-box"),
        trial_of_sweep(gpu, "20261124T115930Z-gpu-box", Setting(4)),
    ]
    report = report_of(cpu_final(), gpu, *trials)
    (option,) = report.decision.options
    assert len(option.group) == 1 and option.tuned is not None
    assert {r.run_id for r in report.runs} == {"ref-cpu", "ref-gpu"}
    (note,) = [w for w in report.warnings if "read through its final run" in w]
    assert note.startswith(
        "2 trials of tuning sweep sweep-ref-gpu (20261124T115900Z-gpu-box, 20261124T115930Z"
    )
    assert pair_of(report)["speedup_at_user_setting"] == pytest.approx(20.0)
    with pytest.raises(UsageError, match="is a --tune trial: name its sweep's final run, 'ref-gpu'"):
        build_report([cpu_final(), gpu, *trials], ReportSettings(baseline="20261124T115900Z-gpu-box"))


def test_a_trial_without_its_final_run_is_sized_with_a_note() -> None:
    lone = trial_of_sweep(gpu_final(), "20261124T115900Z-gpu-box")
    report = report_of(reference_cpu(), lone)
    assert {r.run_id for r in report.runs} == {"ref-cpu", "20261124T115900Z-gpu-box"}
    assert any(w.startswith("20261124T115900Z-gpu-box: a --tune trial") for w in report.warnings)


def test_trials_whose_final_run_was_killed_are_sized_as_runs() -> None:
    """The final run killed while it trained is left out as incomplete: its trials, complete runs, stand
    as runs, where the Decision read "No complete GPU run". --include-incomplete keeps the final."""
    killed = with_info(gpu_final(), status="running")
    lone = trial_of_sweep(gpu_final(), "20261124T115900Z-gpu-box")
    report = report_of(reference_cpu(), killed, lone)
    (option,) = report.decision.options
    assert option.group == ("20261124T115900Z-gpu-box",)
    (note,) = [w for w in report.warnings if w.startswith("20261124T115900Z-gpu-box: a --tune trial")]
    assert "whose sweep's final run ref-gpu is left out as incomplete (training still running (or" in note
    kept = build_report([reference_cpu(), killed, lone], ReportSettings(include_incomplete=True))
    assert {r.run_id for r in kept.runs} == {"ref-cpu", "ref-gpu"}


def test_a_side_whose_sweep_tried_only_your_setting_is_said_untested() -> None:
    """A CPU sweep whose budget held only the reference trial: its 'best' is your setting, not searched."""
    cpu = tuned(reference_cpu(), USER, [trial(USER, rate=1.0)])
    (option,) = report_of(cpu, gpu_final()).decision.options
    assert "CPU batch 2, float32, the only setting its tuning budget held)" in option.line
    assert "GPU batch 8, bfloat16, compile;" in option.line  # the GPU searched: no such words


def _with_tag(run: RunData, change) -> RunData:
    tag = json.loads(json.dumps(run.meta["tuning"]))
    changed = change(tag)
    return replace(run, meta={**run.meta, "tuning": tag if changed is None else changed})


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -20.0, "fast"])
def test_a_reference_trials_rate_that_is_no_rate_is_unknown_and_said(value: object) -> None:
    """A hand-edited or corrupt tag never makes 'nan×' or 'inf×' at your setting: the figure reads as
    unknown, and a warning names the field."""
    gpu = _with_tag(gpu_final(), lambda tag: tag["trials"][0].__setitem__("examples_per_s", value))
    report = report_of(cpu_final(), gpu)
    (option,) = report.decision.options
    assert "at your setting unknown (GPU: the trial at your setting records no examples/s)" in option.line
    assert "nan×" not in option.line and "inf×" not in option.line
    (warning,) = [w for w in report.warnings if "tuning.trials[0].examples_per_s" in w]
    assert warning.startswith("ref-gpu: run.json field tuning.trials[0].examples_per_s is ")
    assert warning.endswith(", not a number ≥ 0: read as unknown")


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda tag: tag.__setitem__("role", "boss"), "has role 'boss', not 'trial' or 'final'"),
        (lambda tag: tag.__delitem__("id"), "has no sweep id (text)"),
        (lambda tag: tag["setting"].__setitem__("batch", 0), "has no setting it can read"),
        (lambda tag: [tag], "is not an object"),
    ],
)
def test_a_tag_that_cannot_be_read_is_an_untuned_run_and_said(change, said: str) -> None:
    report = report_of(cpu_final(), _with_tag(gpu_final(), change))
    (option,) = report.decision.options
    assert "tuned CPU only:" in option.line  # the GPU's final run stands as an untuned run
    (warning,) = [w for w in report.warnings if w.startswith("ref-gpu: run.json field tuning ")]
    assert said in warning and warning.endswith(": read as an untuned run")


def test_a_final_run_without_trials_is_not_called_searched_or_unsearched() -> None:
    gpu = _with_tag(gpu_final(), lambda tag: tag.__setitem__("trials", []))
    report = report_of(cpu_final(), gpu)
    (option,) = report.decision.options
    assert "the only setting its tuning budget held" not in option.line
    assert "at your setting unknown (GPU: the final run records no trials)" in option.line
    assert "ref-gpu: run.json field tuning.trials is empty: no trial read" in report.warnings
    bad = _with_tag(gpu_final(), lambda tag: tag["trials"].insert(1, {"outcome": "ok"}))
    warnings = report_of(cpu_final(), bad).warnings
    said = "ref-gpu: run.json field tuning.trials[1] is not a trial (a setting and an outcome): left out"
    assert said in warnings


def test_a_tuned_cpu_run_of_the_same_task_is_named_as_the_tuned_gpus_baseline() -> None:
    """A CPU run of another task named as the baseline; the tuned CPU run trains the tuned GPU's task at
    another batch: the Decision names it as the baseline that compares them."""
    other_task = with_info(reference_cpu(), preset="standard", backbone="resnet50", image_size=640)
    runs = [renamed(other_task, "cpu-std"), renamed(cpu_final(), "cpu-tuned"), gpu_final()]
    caveats = build_report(runs, ReportSettings(baseline="cpu-std")).decision.caveats
    said = "cpu-tuned (tensorflow/small/resnet18/256px/batch 4/float32) trains the workload of a GPU option"
    assert any(c.startswith(said) for c in caveats), caveats
    plain = build_report([runs[0], runs[2]], ReportSettings(baseline="cpu-std")).decision.caveats
    assert not any("compares them like for like" in c for c in plain)


def test_a_tag_whose_setting_is_not_what_the_training_recorded_is_said_and_the_training_wins() -> None:
    """A tag naming batch 64 over a training.json that trained at batch 8 never says 'GPU batch 64'."""
    gpu = gpu_final()
    tag = {**gpu.meta["tuning"], "setting": {**gpu.meta["tuning"]["setting"], "batch": 64}}
    report = report_of(cpu_final(), replace(gpu, meta={**gpu.meta, "tuning": tag}))
    (option,) = report.decision.options
    assert "GPU batch 8, bfloat16, compile;" in option.line and "batch 64" not in option.line
    said = "ref-gpu: run.json field tuning.setting.batch 64 is not training.json's 8: the training's is taken"
    assert said in report.warnings
    assert not any("tuning.setting" in w for w in report_of(cpu_final(), gpu_final()).warnings)
