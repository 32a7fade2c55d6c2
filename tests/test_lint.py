"""House style is checked by the test suite, so a red lint means a red CI."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_ruff_is_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "."],
        cwd=REPO, capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_shell_scripts_are_shellcheck_clean() -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (./scripts/test.sh installs it when run as root)")
    scripts = [*sorted(str(p.relative_to(REPO)) for p in (REPO / "scripts").glob("*.sh")), ".ci/run"]
    result = subprocess.run(
        ["shellcheck", "-x", *scripts], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_training_never_imports_collect_and_dashboard_never_imports_either() -> None:
    offenders = []
    for package, forbidden in (("training", ("collect",)), ("collect", ("training",)),
                               ("dashboard", ("collect", "training"))):
        for source in (REPO / package).rglob("*.py"):
            for line in source.read_text(encoding="utf-8").splitlines():
                stripped = line.strip()
                if any(stripped.startswith((f"import {name}", f"from {name}")) for name in forbidden):
                    offenders.append(f"{source.relative_to(REPO)}: {stripped}")
    assert not offenders, offenders
