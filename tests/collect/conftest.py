"""Fixtures of the collector tests (the fakes themselves live in collectfakes.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from collectfakes import FakeNvml, two_fake_gpus


@pytest.fixture
def fake_nvml() -> FakeNvml:
    return two_fake_gpus()
