"""A JSON that tools can use (issue 18, item 9), and the HTML report's escaping (item 10)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import jsonschema
import numpy as np
import pytest
import schemacheck
from energyfixtures import fine_gpu, gpu_run, multi_gpu
from sizingfixtures import reference_cpu, reference_gpu

from sizing import Prices, ReportSettings, build_report, to_json
from sizing.cli import main as sizing_main
from sizing.output.render import render_html, render_json, render_markdown

UNIT_WORDS = ("_j", "_w", "usd", "joules", "kwh", "_s")


def crafted_reports() -> list[dict]:
    """Reports over imperfect runs: a board not reported, a reset, partial RAPL, prices for one side."""
    blank = reference_gpu("blank")
    blank = replace(blank, telemetry=blank.telemetry.assign(gpu0_power_w=np.nan, gpu0_energy_j=np.nan))
    reset = fine_gpu("reset")
    elapsed = reset.telemetry["elapsed_s"].to_numpy()
    reset = replace(reset, telemetry=reset.telemetry.assign(
        gpu0_energy_j=np.where(elapsed < 30, 300 * elapsed, 300 * (elapsed - 30))))  # fmt: skip
    cpu = reference_cpu()
    cpu = replace(cpu, telemetry=cpu.telemetry.assign(cpu_energy_j=cpu.telemetry["cpu_energy_j"].where(
        cpu.telemetry["elapsed_s"] < 40)))  # fmt: skip
    settings = [
        ReportSettings(),
        ReportSettings(Prices(gpu_price=2000.0, value_per_hour=10.0)),
        ReportSettings(
            Prices(
                gpu_price_by_model=(("Crafted A100", 9000.0),),
                cpu_price=1000.0,
                utilisation=0.3,
                tariff_per_kwh=None,
            )
        ),
    ]
    runs = [cpu, reference_gpu(), blank, reset, gpu_run("a100", "Crafted A100", 0.2, 250.0),
            multi_gpu("multi", [0.0, 95.0], [60.0, 300.0], None)]  # fmt: skip
    return [to_json(build_report(runs, s)) for s in settings]


def _numbers(value: object, key: str = "") -> list[tuple[str, float]]:
    if isinstance(value, dict):
        return [pair for k, v in value.items() for pair in _numbers(v, str(k))]
    if isinstance(value, list):
        return [pair for v in value for pair in _numbers(v, key)]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return [(key, float(value))]
    return []


def test_the_reports_follow_the_schema_and_the_check_can_fail() -> None:
    for data in crafted_reports():
        schemacheck.validate_report_json(data)
        broken = json.loads(json.dumps(data, default=str))
        broken["runs"][0]["examples_per_s"] = "1.0 examples/s"  # a number written as text
        with pytest.raises(jsonschema.ValidationError):
            schemacheck.validate_report_json(broken)
        broken = json.loads(json.dumps(data, default=str))
        broken["comparisons"][0].update(break_even_hours=None, break_even_reason=None)  # null without why
        with pytest.raises(jsonschema.ValidationError):
            schemacheck.validate_report_json(broken)


def test_never_a_negative_joule_watt_or_dollar() -> None:
    for data in crafted_reports():
        negative = [(k, v) for k, v in _numbers(data) if v < 0 and any(w in k for w in UNIT_WORDS)]
        assert not negative, negative


def test_every_section_has_rows_and_timestamps_are_iso_8601() -> None:
    data = to_json(build_report([reference_cpu(), reference_gpu()], ReportSettings(Prices(gpu_price=2000.0))))
    assert data["schema_version"] == 2
    when = datetime.fromisoformat(data["generated_utc"].replace("Z", "+00:00"))
    assert when.tzinfo is not None and abs((datetime.now(timezone.utc) - when).total_seconds()) < 600
    for key in ("runs", "comparison", "time_to", "energy", "thermal", "bottleneck", "accuracy"):
        assert data["sections"][key], key
    base, gpu = data["sections"]["comparison"]
    assert base["is_baseline"] and base["speedup"] == 1.0 and gpu["speedup"] == pytest.approx(20.0)
    assert gpu["examples_per_s"] == {"mean": 20.0, "std": None, "min": 20.0, "max": 20.0, "n": 1}
    assert gpu["energy_j_per_1k_examples"]["mean"] == pytest.approx(17_500.0)
    times = {r["run_id"]: r for r in data["sections"]["time_to"]}
    assert times["ref-gpu"]["time_to_target_steps_s"] == pytest.approx(20.0 + 999 * 0.1)  # projected
    assert times["ref-gpu"]["time_to_target_steps_projected"] is True
    settings = data["sections"]["settings"]
    assert settings["tariff_usd_per_kwh"] == 0.15 and settings["gpu_price_usd"] == 2000.0
    assert all(not isinstance(v, str) for v in settings.values()), settings


def test_break_even_is_a_number_or_null_with_a_reason(crafted_data_dir: Path, tmp_path: Path) -> None:
    priced, bare = tmp_path / "priced.json", tmp_path / "bare.json"
    common = ["ref-cpu", "ref-gpu", "--data-dir", str(crafted_data_dir)]
    assert sizing_main([*common, "--gpu-price", "2000", "--value-per-hour", "10", "--out", str(priced)]) == 0
    assert sizing_main([*common, "--out", str(bare)]) == 0
    (with_price,) = json.loads(priced.read_text(encoding="utf-8"))["comparisons"]
    (without,) = json.loads(bare.read_text(encoding="utf-8"))["comparisons"]
    assert isinstance(with_price["break_even_hours"], float) and with_price["break_even_reason"] is None
    assert without["break_even_hours"] is None
    assert without["break_even_reason"] == "not computed: GPU not priced (Crafted H100) (--gpu-price)"
    for path in (priced, bare):  # the files the CLI wrote, checked as a tool would read them
        schemacheck.validate_report_json(json.loads(path.read_text(encoding="utf-8")))


def test_html_and_markdown_escape_what_the_runs_say() -> None:
    hostile = "<script>alert('run')</script>"
    cpu = reference_cpu()
    cpu = replace(cpu, meta={**cpu.meta, "label": hostile, "host": "<img src=x onerror=alert(1)>"},
                  warnings=("ref-cpu: <b>bold</b> | piped",))  # fmt: skip
    report = build_report([cpu, reference_gpu()], ReportSettings(Prices(cpu_price=10.0)))
    page = render_html(report)
    assert hostile not in page and "<img src=x" not in page and "<b>bold</b>" not in page
    assert "&lt;script&gt;alert(&#39;run&#39;)&lt;/script&gt;" in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page
    markdown = render_markdown(report)
    assert "<b>bold</b> \\| piped" in markdown  # a pipe cannot break the Markdown table


def test_every_part_the_report_writes_is_typed_in_the_schema() -> None:
    """A section (or a top-level part) added without a schema of its own fails here."""
    from test_sizing_scaling import PRICES, gpu_sweep_run

    runs = [reference_cpu(), *(gpu_sweep_run(n) for n in (1, 2, 4))]
    data = to_json(build_report(runs, ReportSettings(PRICES)))
    typed = schemacheck.SCHEMA["$defs"]["sections"]
    assert set(data["sections"]) <= set(typed["required"]) & set(typed["properties"])
    assert not set(data) - set(schemacheck.SCHEMA["properties"])
    assert data["sections"]["scaling"]["series"] and data["sections"]["validity"]


def _broken(data: dict, change: Callable[[dict], object]) -> dict:
    copy = json.loads(json.dumps(data, default=str))
    change(copy)
    return copy


GUESSED = {"low": 1.0, "high": 2.0, "basis": "guess", "text": "x"}


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["sections"]["scaling"]["series"][0]["rows"][0].update(count="1"),
        lambda d: d["sections"]["scaling"]["series"][0]["rows"][1].update(payback_hours=-1.0),
        lambda d: d["sections"]["scaling"]["series"][0]["rows"][1].pop("pays_back_within_life"),
        lambda d: d["sections"]["scaling"]["series"][0].update(largest_count_paying_back=0),
        lambda d: d["sections"]["validity"][0].update(complete="yes"),
        lambda d: d["sections"]["validity"][0].update(complete=False, incomplete_reason=None),
        lambda d: d["sections"]["validity"][0].pop("steady_drift_pct"),
        lambda d: d["comparisons"][0].update(speedup_interval=GUESSED),
        lambda d: d["comparisons"][0].update(repeats_disagree="repeats disagree"),
        lambda d: d["decision"].update(caveats=["a", "b", "c", "d"]),
        lambda d: d["decision"]["options"][0].update(usd_is_energy_only=None),
        lambda d: d["decision"]["options"][0].update(speedup_interval={"low": 1.0, "high": 2.0}),
    ],
)
def test_the_scaling_validity_and_decision_parts_are_checked(change: Callable[[dict], object]) -> None:
    from test_sizing_scaling import PRICES, gpu_sweep_run

    runs = [reference_cpu(), *(gpu_sweep_run(n) for n in (1, 2)), reference_gpu()]
    data = to_json(build_report(runs, ReportSettings(PRICES)))
    schemacheck.validate_report_json(data)
    assert data["decision"]["options"] and data["comparisons"][0]["speedup_interval"] is not None
    with pytest.raises(jsonschema.ValidationError):
        schemacheck.validate_report_json(_broken(data, change))


def test_every_report_a_test_builds_is_validated_and_the_check_can_fail(
    every_report_follows_the_schema: schemacheck.ReportWatch, tmp_path: Path
) -> None:
    watch = every_report_follows_the_schema
    built = watch.reports
    report = build_report([reference_cpu(), reference_gpu()], ReportSettings())
    assert watch.reports == built + 1 and not watch.problems
    replace(report, headline=())  # a report without a headline breaks the schema (minItems 1)
    assert watch.problems and "headline" in watch.problems[0]
    watch.problems.clear()
    written = tmp_path / "out" / "report.json"
    written.parent.mkdir()
    written.write_text(json.dumps(_broken(to_json(report), lambda d: d.update(headline=[]))))
    (found,) = schemacheck.validate_report_files(tmp_path)
    assert str(written) in found
    written.write_text(render_json(report), encoding="utf-8")
    assert schemacheck.validate_report_files(tmp_path) == []
