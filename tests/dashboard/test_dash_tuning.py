"""The Tuning tab (dashboard.tuning_view, dashboard.tabs.tuning) over sweeps built as run directories."""

from __future__ import annotations

import json
from contextvars import copy_context
from pathlib import Path
from typing import Any

import pytest
from dash._callback_context import context_value
from dash._utils import AttributeDict
from dash.exceptions import PreventUpdate
from tuningfixtures import make_tagged_run

from dashboard import runs, tuning_view, views
from dashboard.app import create_app
from dashboard.details import training_table
from runformat.tuning import FAILED, FINAL, HARMED, OK, TRIAL, Setting, TrialOutcome, TuningTag

START = 1795093375.0
NEW_SWEEP, OLD_SWEEP = "tune-20261121T130255Z-gpu-gpubox", "tune-20261120T090000Z-cpu-cpubox"
YOURS, BIGGER, HUGE, BF16 = Setting(2), Setting(4), Setting(8), Setting(4, "bfloat16")
WHY = "batch 4 ran 1.75x your setting's examples/s at an unharmed loss"


def _trial(sweep: str, position: int, setting: Setting) -> TuningTag:
    return TuningTag(sweep, TRIAL, position, setting, YOURS)


@pytest.fixture
def sweeps_dir(tmp_path: Path) -> Path:
    """A finished sweep (trial #3 not kept on disk), an older stopped one, and a run of no sweep."""
    new = [f"2026112{n}T13000{n}Z-gpu-gpubox" for n in range(5)]
    for position, (setting, rate) in enumerate([(YOURS, 4.0), (BIGGER, 7.0), (HUGE, 1.0)]):
        make_tagged_run(
            tmp_path, new[position], START + 60 * position, _trial(NEW_SWEEP, position, setting), rate
        )
    outcomes = (
        TrialOutcome(new[0], YOURS, OK, None, 4.0, 25.0),
        TrialOutcome(new[1], BIGGER, OK, None, 7.0, 24.0),
        TrialOutcome(new[2], HUGE, FAILED, "out of memory", None, None),
        TrialOutcome(new[3], BF16, HARMED, "mean loss 1.4x your setting's", 9.0, 23.0),
    )
    final = TuningTag(NEW_SWEEP, FINAL, 4, BIGGER, YOURS, WHY, outcomes)
    make_tagged_run(tmp_path, new[4], START + 300, final, 7.2)
    old = ["20261119T090000Z-cpu-cpubox", "20261119T090100Z-cpu-cpubox"]
    make_tagged_run(tmp_path, old[0], START - 86400, _trial(OLD_SWEEP, 0, YOURS), 1.5)
    make_tagged_run(
        tmp_path, old[1], START - 86340, _trial(OLD_SWEEP, 1, BIGGER), 3.0, status="failed", error="OOM\nmore"
    )
    make_tagged_run(tmp_path, "20261122T000000Z-cpu-plain", START + 86400, None, 2.0)
    return tmp_path


def _text(components: list[Any]) -> str:
    """Every component, nested ones and figures included, as JSON text."""
    return json.dumps(components, default=_plain, ensure_ascii=False)


def _plain(value: Any) -> Any:
    return value.to_plotly_json() if hasattr(value, "to_plotly_json") else str(value)


def _sweep(data_dir: Path, sweep_id: str) -> tuning_view.Sweep:
    return next(s for s in tuning_view.find_sweeps(runs.discover_runs(data_dir)) if s.id == sweep_id)


def test_sweeps_are_listed_newest_first_and_the_current_one_is_kept(sweeps_dir: Path) -> None:
    options, value, signature = tuning_view.sweep_choices(sweeps_dir, None)
    assert [o["value"] for o in options] == [NEW_SWEEP, OLD_SWEEP] and value == NEW_SWEEP
    assert options[0]["label"].endswith("4 trials · final run")
    assert options[1]["label"].endswith("2 trials · no final run (stopped or still tuning)")
    old_signature = tuning_view.sweep_choices(sweeps_dir, OLD_SWEEP)[2]
    assert tuning_view.sweep_choices(sweeps_dir, OLD_SWEEP)[1] == OLD_SWEEP
    assert tuning_view.sweep_choices(sweeps_dir, "tune-gone")[1:] == (NEW_SWEEP, signature)
    with open(_sweep(sweeps_dir, OLD_SWEEP).trials[0].path / "training.json", "a") as handle:
        handle.write(" ")
    assert tuning_view.sweep_choices(sweeps_dir, None)[2] == signature  # not the picked sweep's file
    assert tuning_view.sweep_choices(sweeps_dir, OLD_SWEEP)[2] != old_signature  # the picked sweep's file


def test_rows_take_outcomes_from_the_final_run_and_mark_yours_and_the_chosen(sweeps_dir: Path) -> None:
    rows = tuning_view.trial_rows(_sweep(sweeps_dir, NEW_SWEEP))
    assert [(r.label, r.outcome, r.marks) for r in rows] == [
        ("#0", OK, ("your setting",)),
        ("#1", OK, ("chosen",)),
        ("#2", FAILED, ()),
        ("#3", HARMED, ()),
        (FINAL, FINAL, ()),
    ]
    assert [r.examples_per_s for r in rows] == [4.0, 7.0, None, 9.0, pytest.approx(7.2)]
    assert rows[2].reason == "out of memory" and rows[2].setting == "batch 8, float32"
    assert [r.present for r in rows] == [True, True, True, False, True]
    assert rows[-1].reason == WHY and rows[0].steady_s == 25.0 and rows[-1].steady_s is None


def test_a_failed_trial_is_labelled_not_drawn_as_zero(sweeps_dir: Path) -> None:
    rows = tuning_view.trial_rows(_sweep(sweeps_dir, NEW_SWEEP))
    figure = tuning_view.trials_figure(NEW_SWEEP, rows)
    bars = figure.data[0]
    assert list(bars.x) == ["#0", "#1", "#2", "#3", FINAL]
    assert bars.y[2] is None and 0 not in bars.y  # its trial directory says 1.0 examples/s: not drawn
    assert [a.x for a in figure.layout.annotations] == ["#2"]
    assert figure.layout.annotations[0].text == "failed: out of memory"
    assert list(bars.text) == ["your setting", "chosen", "", "harmed", ""]
    colors = list(bars.marker.color)
    assert colors[0] == tuning_view.COLORS["your setting"] and colors[1] == tuning_view.COLORS["chosen"]
    assert colors[4] == tuning_view.COLORS[FINAL] and bars.marker.pattern.shape[3] == "/"


def test_the_tab_shows_the_choice_the_table_and_clickable_run_ids(sweeps_dir: Path) -> None:
    content = tuning_view.tuning_content(sweeps_dir, NEW_SWEEP)
    text = _text(content)
    assert f"Chosen: batch 4, float32 — {WHY}" in text and "your setting: batch 2, float32" in text
    table = next(c for c in content if type(c).__name__ == "Table")
    cells = [row.children for row in table.children[1].children]
    assert [c.children for c in cells[0]][2:] == ["batch 2, float32", OK, "", "4", "25"]
    assert cells[0][1].children.id == {"type": tuning_view.RUN_LINK, "run": "20261120T130000Z-gpu-gpubox"}
    assert cells[2][5].children == "n/a" and cells[3][1].children.endswith("(not in the data dir)")
    assert "Not in the data dir (outcome from the final run only): 20261123T130003Z-gpu-gpubox." in text


def test_a_sweep_without_a_final_run_shows_its_trials_unjudged(sweeps_dir: Path) -> None:
    rows = tuning_view.trial_rows(_sweep(sweeps_dir, OLD_SWEEP))
    assert [(r.label, r.outcome, r.reason, r.examples_per_s) for r in rows] == [
        ("#0", "not judged", "training deadline", 1.5),
        ("#1", FAILED, "OOM", None),
    ]
    assert rows[0].marks == ("your setting",) and rows[1].marks == ()
    text = _text(tuning_view.tuning_content(sweeps_dir, OLD_SWEEP))
    assert "no final run (stopped or still tuning)" in text and "Chosen" not in text


def test_your_setting_kept_is_marked_both(tmp_path: Path) -> None:
    outcomes = (TrialOutcome("a", YOURS, OK, None, 4.0, 25.0), TrialOutcome("b", BIGGER, OK, None, 4.1, 25.0))
    make_tagged_run(
        tmp_path,
        "20261121T130000Z-cpu-x",
        START,
        TuningTag("tune-x", FINAL, 2, YOURS, YOURS, "kept", outcomes),
        4,
    )
    rows = tuning_view.trial_rows(_sweep(tmp_path, "tune-x"))
    assert [r.marks for r in rows] == [("your setting", "chosen"), (), ()]
    assert [r.present for r in rows] == [False, False, True]


def test_no_sweep_says_how_to_make_one(tmp_path: Path) -> None:
    make_tagged_run(tmp_path, "20261121T130000Z-cpu-plain", START, None, 2.0)
    [hint] = tuning_view.tuning_content(tmp_path, None)
    assert "./scripts/collect_gpu.sh 10m --tune" in hint.children
    assert tuning_view.sweep_choices(tmp_path, None)[:2] == ([], None)


def test_the_runs_list_and_the_training_table_tag_a_sweeps_runs(sweeps_dir: Path) -> None:
    found = {run.run_id: run for run in runs.discover_runs(sweeps_dir)}
    labels = {run_id: views.option_label(run) for run_id, run in found.items()}
    assert labels["20261120T130000Z-gpu-gpubox"].endswith(f"· trial 0 (your setting) of sweep {NEW_SWEEP}")
    assert labels["20261121T130001Z-gpu-gpubox"].endswith(f"· trial 1 of sweep {NEW_SWEEP}")
    assert labels["20261124T130004Z-gpu-gpubox"].endswith(f"· final of sweep {NEW_SWEEP}")
    assert labels["20261122T000000Z-cpu-plain"].endswith("· completed")
    table = training_table([found["20261124T130004Z-gpu-gpubox"], found["20261122T000000Z-cpu-plain"]])
    header = [th.children for th in table.children[0].children.children]
    rows = [[td.children for td in tr.children] for tr in table.children[1].children]
    assert header[:2] == ["run", "tuning"]
    assert rows[0][1] == f"final of sweep {NEW_SWEEP}" and rows[1][1] == "not tuned"
    untuned = training_table([found["20261122T000000Z-cpu-plain"]])
    assert "tuning" not in [th.children for th in untuned.children[0].children.children]


def _callback(app, output: str):
    [spec] = [spec for key, spec in app.callback_map.items() if output in key.strip(".").split("...")]
    return spec["callback"].__wrapped__


def _clicked(function, prop_id: str, value: Any, *args: Any) -> Any:
    def call() -> Any:
        context_value.set(AttributeDict(triggered_inputs=[{"prop_id": prop_id, "value": value}]))
        return function(*args)

    return copy_context().run(call)


def test_the_tab_callbacks(sweeps_dir: Path) -> None:
    app = create_app(sweeps_dir)
    choose, content = _callback(app, "sweep-picker.options"), _callback(app, "tab-tuning.children")
    with pytest.raises(PreventUpdate):
        choose("training", [], None, None)  # hidden: no work
    options, value, version = choose("tuning", [], None, None)
    assert value == NEW_SWEEP and len(options) == 2
    with pytest.raises(PreventUpdate):
        choose("tuning", [], value, version)  # nothing changed on the refresh tick
    assert type(content("tuning", OLD_SWEEP, version)[0]).__name__ == "H3"
    pick = _callback(app, "run-picker.value")
    link = json.dumps({"run": "20261121T130001Z-gpu-gpubox", "type": tuning_view.RUN_LINK}) + ".n_clicks"
    assert _clicked(pick, link, 1, [1], ["other"]) == ["other", "20261121T130001Z-gpu-gpubox"]
    assert _clicked(pick, link, 1, [1], ["20261121T130001Z-gpu-gpubox"]) == ["20261121T130001Z-gpu-gpubox"]
    with pytest.raises(PreventUpdate):
        _clicked(pick, link, 0, [0], ["other"])  # the buttons were redrawn, none clicked


def test_malformed_tags_are_no_sweep_and_a_final_without_trials_falls_back(tmp_path: Path) -> None:
    bad = make_tagged_run(tmp_path, "20261121T130000Z-cpu-bad", START, None, 2.0)
    meta = json.loads((bad / "run.json").read_text())
    (bad / "run.json").write_text(json.dumps({**meta, "tuning": {"id": "tune-bad", "role": "final"}}))
    final = TuningTag("tune-y", FINAL, 1, BIGGER, YOURS, None, ())
    make_tagged_run(tmp_path, "20261121T130100Z-cpu-y", START + 60, _trial("tune-y", 0, YOURS), 3.0)
    make_tagged_run(tmp_path, "20261121T130200Z-cpu-y", START + 120, final, 5.0)
    assert [s.id for s in tuning_view.find_sweeps(runs.discover_runs(tmp_path))] == ["tune-y"]
    rows = tuning_view.trial_rows(_sweep(tmp_path, "tune-y"))
    assert [(r.label, r.outcome, r.examples_per_s) for r in rows] == [
        ("#0", "not judged", 3.0),
        (FINAL, FINAL, 5.0),
    ]
    assert "why: not recorded" in _text(tuning_view.tuning_content(tmp_path, "tune-y"))


def test_the_first_selection_skips_a_sweeps_trials(sweeps_dir: Path) -> None:
    """A stopped sweep's trial is the second newest run; the first selection takes whole runs instead (all
    of this data dir's runs are CPU runs: the two newest whole ones)."""
    stopped = _trial("tune-stopped", 0, YOURS)
    make_tagged_run(sweeps_dir, "20261126T000000Z-gpu-gpubox", START + 400, stopped, 3.0)
    found = runs.discover_runs(sweeps_dir)
    assert [run.run_id for run in found[:2]] == ["20261122T000000Z-cpu-plain", "20261126T000000Z-gpu-gpubox"]
    assert views.default_selection(found) == ["20261122T000000Z-cpu-plain", "20261124T130004Z-gpu-gpubox"]
    assert views.default_selection(found[1:2]) == ["20261126T000000Z-gpu-gpubox"]  # nothing else: the trial
