"""Fixtures for the sizing-analysis tests: crafted runs with hand-computable figures (sizingfixtures)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from schemacheck import every_report_follows_the_schema  # noqa: F401  (autouse: every report is validated)
from sizingfixtures import reference_cpu, reference_gpu, write_run

from dashboard import runs


@pytest.fixture(autouse=True)
def _fresh_caches():
    runs.clear_caches()
    yield
    runs.clear_caches()


@pytest.fixture
def crafted_data_dir(tmp_path: Path) -> Path:
    """data/ with the reference CPU run under examples/ and the reference GPU run under runs/."""
    write_run(tmp_path / "examples", reference_cpu())
    write_run(tmp_path / "runs", reference_gpu())
    return tmp_path
