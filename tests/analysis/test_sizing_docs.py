"""docs/sizing.md states the definitions the code uses, word for word, and documents the JSON fields."""

from __future__ import annotations

from pathlib import Path

from sizing.model import Thresholds
from sizing.sections.definitions import DEFINITIONS, definitions

DOC = (Path(__file__).resolve().parents[2] / "docs" / "sizing.md").read_text(encoding="utf-8")


def test_every_definition_is_in_the_docs_verbatim() -> None:
    lines = set(DOC.splitlines())
    missing = [term for term, text in DEFINITIONS if f"- **{term}**: {text}" not in lines]
    assert not missing, missing


def test_the_definitions_follow_the_thresholds_in_use() -> None:
    changed = dict(definitions(Thresholds(gpu_bound_util_pct=70.0, iowait_pct=15.0)))
    assert "least busy used GPU ≥ 70 %" in changed["Verdicts"] and "iowait ≥ 15 %" in changed["Verdicts"]
    assert changed["Verdicts"] != dict(DEFINITIONS)["Verdicts"]


def test_the_json_fields_the_issue_names_are_documented() -> None:
    for field in ("baseline", "run_id", "workload", "hardware", "examples_per_s", "steps_per_s",
                  "energy_j_per_1k_examples", "energy_is_estimate", "like_for_like", "differences",
                  "speedup", "speedup_ci95", "break_even_hours", "warnings"):  # fmt: skip
        assert f'"{field}"' in DOC, field


def test_every_key_of_the_real_json_output_is_documented() -> None:
    from sizingfixtures import reference_cpu, reference_gpu

    from sizing import ReportSettings, build_report, to_json

    data = to_json(build_report([reference_cpu(), reference_gpu()], ReportSettings()))
    keys = set(data) | set(data["runs"][0]) | set(data["comparisons"][0]) | set(data["runs"][0]["workload"])
    keys |= set(data["runs"][0]["hardware"]) | set(data["sections"])
    undocumented = sorted(k for k in keys if f'"{k}"' not in DOC and f"`{k}`" not in DOC)
    assert not undocumented, undocumented
