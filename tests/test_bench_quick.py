"""Benchmarks cannot rot: every bench/*.py runs here in its --quick mode, exits 0 and ends with the last
line its docstring documents (`Last line: name=<...> name=<...>`). Full runs stay manual."""

from __future__ import annotations

import ast
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCHES = sorted((REPO / "bench").glob("*.py"))


def documented_names(script: Path) -> list[str]:
    """The names of the `name=<...>` pairs on the docstring's `Last line:` line."""
    doc = (ast.get_docstring(ast.parse(script.read_text())) or "").splitlines()
    starts = [i for i, line in enumerate(doc) if line.strip().startswith("Last line:")]
    assert len(starts) == 1, f"{script.name}: its docstring must document one 'Last line:'"
    lines = [doc[starts[0]]]
    for line in doc[starts[0] + 1 :]:  # indented lines of name=<...> pairs continue it
        if not (line.startswith(" ") and re.fullmatch(r"(\s+\w+=<[^>]*>)+", line)):
            break
        lines.append(line)
    names = re.findall(r"(\w+)=<", " ".join(lines))
    assert names, f"{script.name}: no name=<...> pairs on its 'Last line:'"
    return names


def test_every_benchmark_is_found() -> None:
    assert {path.name for path in BENCHES} >= {
        "dashboard_scale.py",
        "sampler_overhead.py",
        "soak.py",
        "train_throughput.py",
    }


OTHER_MODES = [(REPO / "bench" / "busiest_thread_cost.py", ("--column", "io"))]  # --quick of each mode


@pytest.mark.slow
@pytest.mark.parametrize(
    ("script", "mode"),
    [*((path, ()) for path in BENCHES), *OTHER_MODES],
    ids=[*(path.name for path in BENCHES), *(f"{path.name} {' '.join(mode)}" for path, mode in OTHER_MODES)],
)
def test_benchmark_quick_mode(script: Path, mode: tuple[str, ...]) -> None:
    names = documented_names(script)
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    result = subprocess.run(
        [sys.executable, str(script), "--quick", *mode],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    last = result.stdout.strip().splitlines()[-1]
    pattern = " ".join(rf"{name}=(\S+)" for name in names)
    match = re.fullmatch(pattern, last)
    assert match, f"{script.name}: last line {last!r} is not {pattern!r}"
    for name, text in zip(names, match.groups(), strict=True):
        value = float(text)  # every value is a number (nan where the doc says so)
        difference = name.endswith("growth_kb") or name.startswith("added_")  # noise can make it negative
        assert math.isnan(value) or value >= 0 or difference, f"{name}={text}"
