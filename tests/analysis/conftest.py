"""Fixtures for the sizing-analysis tests: crafted runs with hand-computable figures (sizingfixtures)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from schemacheck import validating
from sizingfixtures import reference_cpu, reference_gpu, write_run

import sizing
import sizing.render
import sizing.report
from dashboard import runs


@pytest.fixture(autouse=True)
def _fresh_caches():
    runs.clear_caches()
    yield
    runs.clear_caches()


@pytest.fixture(autouse=True)
def _every_json_report_follows_the_schema(monkeypatch: pytest.MonkeyPatch):
    """Every report a test turns into JSON (to_json, render_json, the CLI in-process) is validated."""
    checked = validating(sizing.report.to_json)
    for module in (sizing, sizing.render, sizing.report):
        monkeypatch.setattr(module, "to_json", checked)
    yield


@pytest.fixture
def crafted_data_dir(tmp_path: Path) -> Path:
    """data/ with the reference CPU run under examples/ and the reference GPU run under runs/."""
    write_run(tmp_path / "examples", reference_cpu())
    write_run(tmp_path / "runs", reference_gpu())
    return tmp_path
