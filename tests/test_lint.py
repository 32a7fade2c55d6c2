"""House style is checked by the test suite, so a red lint means a red CI."""

from __future__ import annotations

import re
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
    found = [*(REPO / "scripts").glob("*.sh"), *(REPO / "scripts" / "slurm").glob("*.sbatch")]
    scripts = [*sorted(str(p.relative_to(REPO)) for p in found), ".ci/run"]
    result = subprocess.run(
        ["shellcheck", "-x", *scripts], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _imports_of(source: Path, packages: tuple[str, ...]) -> list[str]:
    pattern = re.compile(rf"^\s*(?:from|import)\s+({'|'.join(packages)})(?:[.\s]|$)")
    return [line.strip() for line in source.read_text(encoding="utf-8").splitlines() if pattern.match(line)]


def test_training_never_imports_collect_and_dashboard_never_imports_either() -> None:
    rules = {
        "training": ("collect", "sizing"),
        "collect": ("training", "sizing"),
        "dashboard": ("collect", "training"),
        "sizing": ("dashboard", "collect", "training", "dash", "plotly_resampler"),
    }
    offenders = [
        f"{source.relative_to(REPO)}: {line}"
        for package, forbidden in rules.items()
        for source in (REPO / package).rglob("*.py")
        for line in _imports_of(source, forbidden)
    ]
    assert not offenders, offenders


def test_sizing_runs_without_dash() -> None:
    """`python -m sizing` with the Dash packages made unimportable: the package must not need them."""
    code = (
        "import sys; sys.modules['dash'] = None; sys.modules['plotly_resampler'] = None\n"
        "import sizing, sizing.cli, sizing.render, sizing.figures\n"
        "assert not {'dashboard', 'collect', 'training'} & set(sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def test_the_layering_check_catches_a_forbidden_import(tmp_path: Path) -> None:
    source = tmp_path / "x.py"
    source.write_text("from collections.abc import Callable\nimport collectible\nfrom collect.x import y\n")
    assert _imports_of(source, ("collect",)) == ["from collect.x import y"]
